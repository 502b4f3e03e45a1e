"""Stalwart's own agents as the resource manager: :mod:`.manager` (the
:class:`~stalwart.master.rm.base.ResourceManager`) and :mod:`.placement` (the scheduling round
against the database). The agents' side of the protocol is :mod:`stalwart.master.cluster.
agent_sync` (their syncs arrive through the API, not through this manager)."""
