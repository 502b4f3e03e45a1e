"""Stalwart's benchmarks (not part of ``make test``): ``python -m bench run [--quick] [NAME...]``.

Each benchmark module registers in :data:`bench.__main__.BENCHMARKS`; results print as a table
and are written as JSON under ``bench/results/``. See ``docs/benchmarks.md``.
"""
