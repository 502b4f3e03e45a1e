"""Tests of the pure pieces of ``bench/`` (the long benchmarks themselves are not run here)."""
