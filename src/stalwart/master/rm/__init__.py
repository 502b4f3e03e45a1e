"""Resource managers: how the master runs allocations on an engine.

:mod:`~stalwart.master.rm.base` is the seam (the :class:`~stalwart.master.rm.base.ResourceManager`
interface, its capability mixins and the state lock's contract); one folder per engine implements
it: :mod:`~stalwart.master.rm.agent` (Stalwart's own agents), :mod:`~stalwart.master.rm.hpc`
(Slurm and PBS) and :mod:`~stalwart.master.rm.kubernetes`. :mod:`~stalwart.master.rm.settings`
holds the ``resource_manager`` union of the master config. Nothing here is imported at package
import time: settings modules are pydantic only, and an engine's client is loaded when that engine
is configured.
"""
