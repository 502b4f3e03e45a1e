"""Tests of the scheduler policies (pure functions over snapshots)."""
