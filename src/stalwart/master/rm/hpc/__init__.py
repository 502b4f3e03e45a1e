"""The master's Slurm resource manager (issue 7, second layer).

:mod:`~stalwart.master.rm.hpc.settings` declares ``resource_manager: {type: slurm, ...}``;
:mod:`~stalwart.master.rm.hpc.jobs` is the database side of batch allocations;
:mod:`~stalwart.master.rm.hpc.manager` is what the cluster loop calls. The Slurm commands, the
batch script and the task launcher are in :mod:`stalwart.hpc` (no master dependencies).
"""
