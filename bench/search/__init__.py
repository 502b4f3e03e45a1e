"""B4's search-quality simulation (issue 10): problems, simulator and statistics.

Only numpy and the standard library are imported here, so that the peers' virtual environment
(``.cache/bench-peers``) can import :mod:`bench.search.problems` and :mod:`bench.search.sim`
too; the Stalwart searchers are driven from :mod:`bench.search.policies` (project venv only).
"""
