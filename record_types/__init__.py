"""Built-in record types: one module per type, each one `RecordType` declaration
(see basecrawler/recordtypes). Drop a module here to add a type."""
