"""Per-request records: their schema, incremental Parquet writing, and reading them back; the run
directory's format (``rundir``) for measured and simulated runs; the live snapshot (``live``)."""
