"""Compatibility tests: the official ``determined==0.38.1`` client against a real master."""
