"""Delta reads through the dbt connection, the target's commit log, the state tables, session confs, Spark's clock."""
