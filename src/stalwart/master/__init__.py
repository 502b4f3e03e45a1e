"""The Stalwart master: the REST API (Determined's v1 dialect), the database, scheduling.

Importing this package has no side effects: no engine, no settings. ``create_app(settings)`` in
:mod:`stalwart.master.app` builds everything from a
:class:`~stalwart.master.settings.MasterSettings`.
It needs the ``master`` extra (``pip install 'stalwart[master]'``).
"""
