"""Training scripts the benchmarks submit as model definitions (read as text, never imported)."""
