"""SQL analysis and rewriting of a compiled model (pure; sqlglot, Spark dialect): what it reads, how it replays, the statement text."""
