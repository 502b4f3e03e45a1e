"""The programs interactive tasks run inside their environment (``python -m stalwart.tasks.X``).

Each program reads the task contract from its environment (:class:`stalwart.core.env.TaskEnv`
plus the variables below), starts its service on ``DET_SERVICE_PORT`` and tells the master
when it is ready (:mod:`stalwart.tasks._report`). The master's proxy then reaches it at its
node's address and that port.

Contract variables (set by the master in the task spec, ``services/task_spec.py``):

- ``DET_TASK_TYPE``: ``COMMAND``, ``NOTEBOOK``, ``SHELL``, ``TENSORBOARD`` or ``GENERIC``;
- ``DET_SERVICE_PORT``: the port the task's service listens on (all interfaces); notebooks also
  get it as ``NOTEBOOK_PORT`` and TensorBoards as ``TENSORBOARD_PORT``, as in Determined;
- ``DET_NOTEBOOK_TOKEN``, ``NOTEBOOK_IDLE_TYPE`` (notebooks);
- ``DET_SHELL_AUTHORIZED_KEYS`` (shells: the public key the master handed to the owner);
- ``DET_TENSORBOARD_SOURCES`` (TensorBoards: JSON list of the trials to show).
"""
