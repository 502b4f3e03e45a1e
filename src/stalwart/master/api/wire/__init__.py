"""Converters from database rows and service views to the wire models of ``api.models``.

They live apart from the models so that ``stalwart.master.api.models`` imports with the base
dependencies only (the SDK validates the master's answers with those same classes); these
modules import the tables and services, so only the master imports them.
"""
