"""kueued's RBAC: a least-privilege ClusterRole, a Role for its leases, and who they are bound to.

:data:`RULES` is the single list of what the daemon may call, one rule per code path that
needs it, with the reason beside it.  It is data so a test can hold it against the calls
the API layer makes: a verb no code path uses should go, and a call without a rule fails
in the cluster (403), not in review.  Nothing here is ``*``.

Cluster-wide rules become the ClusterRole ``kueued``; the lease rule (leader election)
becomes a Role in kueued's own namespace, so kueued cannot touch another controller's
lease.  Both are bound to the ServiceAccount ``kueued`` there and, when asked, to a plain
user (integration tests authenticate as user ``kueued`` with a client certificate).

The user gets bindings of its own (``kueued:user:NAME``) rather than a second subject in the
ServiceAccount's: ``subjects`` is one atomic list to server-side apply, so a cluster set up
with a user (``make dev-cluster`` binds user ``kueued``) would otherwise refuse a later plain
``kueued manifests | kubectl apply --server-side -f -`` with a conflict on it.  Now the two
streams agree on every object they share.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kueued.kube.crds import KOORDINATOR_GROUP, KUEUE_GROUP

__all__ = ["Rule", "RULES", "NAME", "rbac"]

NAME = "kueued"
_RBAC = "rbac.authorization.k8s.io"
_WATCH = ("list", "watch")


class Rule(NamedTuple):
    group: str                 # "" is the core group
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str                   # the code path that calls it
    namespaced: bool = False   # True: granted in kueued's namespace only (the Role)


RULES: tuple[Rule, ...] = (
    # ClusterSource (kube/watch.py): list, then watch, every kind the World applies.
    Rule(KUEUE_GROUP, ("cohorts", "clusterqueues", "localqueues"), _WATCH,
         "ClusterSource: list-then-watch of the Kueue kinds the World applies"),
    # KubeClient.get reads one object back: a Workload (a commit in doubt, the Job integration),
    # a ResourceFlavor and a WorkloadPriorityClass (the Job integration's flavors and priority).
    Rule(KUEUE_GROUP, ("resourceflavors", "workloadpriorityclasses", "workloads"), ("get", "list", "watch"),
         "ClusterSource: list-then-watch; KubeClient.get of one Workload, flavor or priority class"),
    # KubePort.admit / evict / flush_pending (kube/commits.py): a merge patch of
    # status.admission and conditions carrying the resourceVersion decided on, so a
    # conflict fails the commit (KubeClient.patch_status).  Never a PUT, never a read of the
    # subresource (a get of the object shows the same).
    Rule(KUEUE_GROUP, ("workloads/status",), ("patch",),
         "KubePort.admit, evict, flush_pending: admission, eviction and Pending conditions on the Workload"),
    # The queue status writer (kube/status_publisher.py): pending/reserving/admitted counts,
    # flavor usage, fair share, and the Active condition that says why a queue is inactive.
    Rule(KUEUE_GROUP, ("clusterqueues/status", "localqueues/status", "cohorts/status"), ("patch",),
         "queue status writer: counts, usage, fair share and conditions of ClusterQueues, LocalQueues, Cohorts"),
    # kube/finalizers.py: Kueue's resource-in-use finalizer put on every ClusterQueue and
    # ResourceFlavor that lacks it, and taken off a deleted one once it is no longer in use (merge
    # patches of its metadata, with the version decided on).
    Rule(KUEUE_GROUP, ("clusterqueues", "resourceflavors"), ("patch",),
         "hold_finalizers, release_finalizers: Kueue's resource-in-use finalizer on every ClusterQueue and "
         "ResourceFlavor, off a deleted one no longer in use"),
    # The Job integration (kube/jobs.py): a Workload per Job, kept in step with it (merge
    # patches), removed with it; kube/finalizers.py: Kueue's finalizer off a deleted Workload.
    Rule(KUEUE_GROUP, ("workloads",), ("create", "patch", "delete"),
         "Job integration: creates, patches and deletes the Workload that stands for a Job; "
         "release_finalizers: Kueue's resource-in-use finalizer off a deleted Workload; "
         "KubePort.deactivate: spec.active false once a maximum execution time runs out; "
         "Retention.sweep: deletes a finished Workload (objectRetentionPolicies)"),
    # kube/in_force.py: the version in force of an object whose newest version kueued refused, kept
    # in an annotation so a restart refuses that version again (ClusterQueues, ResourceFlavors,
    # Workloads and ElasticQuotas are patched by the rules above and below already).
    Rule(KUEUE_GROUP, ("cohorts", "localqueues", "workloadpriorityclasses"), ("patch",),
         "TreeStatusPublisher.in_force: the kueued.io/in-force annotation on an object whose update was refused"),
    # The ElasticQuota watch, then KubePort.annotate_quota: Koordinator's request/runtime
    # annotations are metadata, so they are a merge patch of the object itself (KubeClient.patch).
    Rule(KOORDINATOR_GROUP, ("elasticquotas",), (*_WATCH, "patch"),
         "ClusterSource: list-then-watch of ElasticQuota groups; KubePort.annotate_quota: the "
         "quota.scheduling.koordinator.sh/request and /runtime annotations"),
    # KubePort.set_quota_condition: the Accepted condition on an ElasticQuota's status.
    Rule(KOORDINATOR_GROUP, ("elasticquotas/status",), ("patch",),
         "KubePort.set_quota_condition: an ElasticQuota's Accepted condition (why it was refused)"),
    # Namespace labels decide ClusterQueue namespaceSelectors; nodes' allocatable is the
    # elastic quota tree's total; a namespace's LimitRanges default and bound its Workloads' pods.
    Rule("", ("namespaces", "nodes", "limitranges"), _WATCH,
         "ClusterSource: namespace labels for namespaceSelectors, node allocatable for the elastic total, "
         "LimitRanges for Workloads' defaults and bounds"),
    # KubeClient.create_event: a decision as a core/v1 Event on the object it concerns
    # (cluster-scoped objects' events in `default`); each is a new Event, never a patch.
    Rule("", ("events",), ("create", "patch"),
         "KubeClient.create_event: admissions, evictions, refusals; EventRecorder: a repeat counted on its Event"),
    # The Job integration (kube/jobs.py): suspend a Job until admitted, then unsuspend it with
    # the flavors' node selector and tolerations; suspend it again and restore its template on
    # eviction (merge patches, never a PUT).
    Rule("batch", ("jobs",), ("get", "list", "watch", "patch", "delete"),
         "Job integration: watches Jobs, suspends and unsuspends them, injects node selectors; "
         "Retention.sweep: deletes the Job of a Workload Kueue deactivated (objectRetentionPolicies)"),
    # A stopped Job's template may change only once status.startTime is cleared (the API server's rule
    # for a suspended Job's scheduling directives); Kueue clears it the same way.
    Rule("batch", ("jobs/status",), ("patch",),
         "Job integration: clears status.startTime of a stopped Job so its pod template can be restored"),
    # A Workload's ownerReference to its Job sets blockOwnerDeletion, which the
    # OwnerReferencesPermissionEnforcement admission plugin allows only to who may update the
    # Job's finalizers (as Kueue's role grants).
    Rule("batch", ("jobs/finalizers",), ("update",),
         "Job integration: the Workload's ownerReference with blockOwnerDeletion to its Job"),
    # A Job's Workload takes the priority of its pods' PriorityClass (or of the global default).
    Rule("scheduling.k8s.io", ("priorityclasses",), ("get", "list"),
         "Job integration: the priority of a Job's pod priorityClassName, or the globalDefault class"),
    # Leader election: one active kueued; a Lease in kueued's own namespace only.
    Rule("coordination.k8s.io", ("leases",), ("get", "create", "update"),
         "leader election: read, take and renew kueued's Lease", namespaced=True),
)


def _policy(rule: Rule) -> dict[str, Any]:
    return {"apiGroups": [rule.group], "resources": list(rule.resources), "verbs": list(rule.verbs)}


def _bindings(name: str, namespace: str, labels: dict[str, str],
              subjects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ClusterRoleBinding and the lease RoleBinding called ``name`` for these subjects."""
    return [
        {"apiVersion": f"{_RBAC}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name, "labels": labels},
         "roleRef": {"apiGroup": _RBAC, "kind": "ClusterRole", "name": NAME}, "subjects": subjects},
        {"apiVersion": f"{_RBAC}/v1", "kind": "RoleBinding",
         "metadata": {"name": name, "namespace": namespace, "labels": labels},
         "roleRef": {"apiGroup": _RBAC, "kind": "Role", "name": NAME}, "subjects": subjects},
    ]


def rbac(*, namespace: str = "kueued-system", user: str | None = None) -> list[dict[str, Any]]:
    """The Namespace, ServiceAccount, roles and bindings, in the order ``kubectl apply`` needs;
    with ``user``, that user's own bindings last."""
    labels = {"app.kubernetes.io/managed-by": "kueued"}
    account = [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]
    cluster_binding, lease_binding = _bindings(NAME, namespace, labels, account)
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": NAME, "namespace": namespace, "labels": labels}},
        {"apiVersion": f"{_RBAC}/v1", "kind": "ClusterRole", "metadata": {"name": NAME, "labels": labels},
         "rules": [_policy(r) for r in RULES if not r.namespaced]},
        cluster_binding,
        {"apiVersion": f"{_RBAC}/v1", "kind": "Role",
         "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
         "rules": [_policy(r) for r in RULES if r.namespaced]},
        lease_binding,
    ]
    if user:
        docs += _bindings(f"{NAME}:user:{user}", namespace, labels,
                          [{"kind": "User", "apiGroup": _RBAC, "name": user}])
    return docs
