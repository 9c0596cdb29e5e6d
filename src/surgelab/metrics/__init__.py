"""Per-request records: their schema, incremental Parquet writing, and reading them back."""
