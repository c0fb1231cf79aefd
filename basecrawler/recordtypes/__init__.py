"""Record types: what a record *is*, declared once, apart from how it *flows*.

A record type is one `RecordType` declaration in a module of the top-level `record_types/`
package (or a package registering the entry-point group `basecrawler.record_types`). The store
(table, indexes, full-text search, the COALESCE upsert), search, export, the web view,
translation, dead-letter retry, `migrate` and `status` read the declaration; none of them names
a type. A type module imports nothing but this package (and pydantic / the standard library).

The public declaration API:
- `RecordType`, `Facet` (declaration.py) — the declaration itself;
- `Record` (declaration.py) — what a source's `parse()` returns for a record of a type other
  than the source's default `record_type`;
- `record_types()`, `get_record_type()`, `register_record_type()` (registry.py) — discovery;
- field helpers for every type's model (fields.py): blank → None, `Text`, the unknown-date rule.

What the framework derives from a declaration, with no per-type code: the table, its key,
indexes and full-text index (tables.py), the COALESCE upsert (upsert.py).
"""
from basecrawler.recordtypes.declaration import Facet, Record, RecordType
from basecrawler.recordtypes.registry import get_record_type, record_types, register_record_type

__all__ = ["Facet", "Record", "RecordType", "get_record_type", "record_types", "register_record_type"]
