"""The master's Kubernetes resource manager (issue 12).

:mod:`~stalwart.master.k8s.settings` declares ``resource_manager: {type: kubernetes, ...}``
(pydantic only; the master settings embed it). The rest is imported only when that type is
configured: :mod:`~stalwart.master.k8s.manifests` and :mod:`~stalwart.master.k8s.podspec`
(pure builders of the Job, ConfigMap, Secrets of an allocation),
:mod:`~stalwart.master.k8s.prepull` (the pre-pull DaemonSet), :mod:`~stalwart.master.k8s.states`
(pod and Job statuses as allocation states), :mod:`~stalwart.master.k8s.client` (the API over
httpx), :mod:`~stalwart.master.k8s.queue` (rate limits), :mod:`~stalwart.master.k8s.informer`
(watches), :mod:`~stalwart.master.k8s.allocations` (the database side) and
:mod:`~stalwart.master.k8s.manager` (what the cluster loop calls).
"""
