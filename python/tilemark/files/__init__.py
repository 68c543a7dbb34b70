"""File sets and file/metadata workloads (docs/files.md, issue 26).

spec.py parses a workload's `[[fileset]]` and `[[filestream]]` tables, fileset.py prepares a
set under the directory the user handed over (and refuses what is unsafe), run.py runs the
streams in the engine's file runner and sums up what each operation did.
"""
