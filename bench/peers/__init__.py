"""Peer-side code for the benchmarks against peers; runs in .cache/bench-peers, not .venv."""
