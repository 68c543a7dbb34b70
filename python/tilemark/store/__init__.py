"""Results storage: one directory per run (the source of truth) and a DuckDB catalog over them.

Formats: docs/results-schema.md. Import the module you need (`store.rundoc` reads runs,
`store.rundir` writes them, `store.catalog` is the DuckDB catalog, `store.outputs` writes files
for the user); this package imports none of them, so a light command does not load DuckDB or
pyarrow by touching one.
"""
