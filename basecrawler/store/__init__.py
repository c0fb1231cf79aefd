"""The store and its engines: opening, schema and migrations, the upsert derived from record types, SQLite and PostgreSQL, a full disk told whatever reports it."""
