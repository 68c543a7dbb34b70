"""Traces: block requests of real applications, captured from the kernel or imported from
published formats, stored as Parquet (schema.py, docs/traces.md), shown, and replayed."""
