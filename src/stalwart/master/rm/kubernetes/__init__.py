"""The master's Kubernetes resource manager.

:mod:`.settings` declares ``resource_manager: {type: kubernetes, ...}`` (pydantic only; the
master settings embed it). The rest is imported only when that type is configured:
:mod:`.manifests` and :mod:`.podspec` (pure builders of the Job, ConfigMap, Secrets of an
allocation), :mod:`.prepull` (the pre-pull DaemonSet), :mod:`.states` (pod and Job statuses as
allocation states), :mod:`.client` (the API), :mod:`.queue` (rate limits), :mod:`.informer`
(watches), :mod:`.allocations` (the database side) and :mod:`.manager` (the
:class:`~stalwart.master.rm.base.ResourceManager`).
"""
