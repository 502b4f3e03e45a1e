"""``stalwart import determined``: a Determined 0.38 cluster's history, into a Stalwart master.

The importer reads a Determined database read-only (:mod:`.source`) and writes through
Stalwart's tables, in this order: users, workspaces, projects (:mod:`.people`); experiments
with their trials and checkpoints (:mod:`.history`); models and versions, templates, webhooks
(:mod:`.registry`); metrics in bulk (:mod:`.metrics`). Every imported thing is recorded in
``import_mappings`` in the transaction that imports it (:mod:`.ids`), which makes a second run
import only what is new and an interrupted run continue; Determined's ids are kept where they
are free here. :func:`import_determined` runs it and returns the :class:`ImportReport`.
"""

from __future__ import annotations

from stalwart.master.importer.report import ImportReport, Skipped
from stalwart.master.importer.run import import_determined

__all__ = ["ImportReport", "Skipped", "import_determined"]
