"""The master's database: engine, tables and migrations."""
