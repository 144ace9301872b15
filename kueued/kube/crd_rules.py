"""Kueue's CEL validation rules, carried by kueued's CRDs so the API server refuses what Kueue's does.

Kueue's CRDs hold part of its validation as CEL (``x-kubernetes-validations``, from the
``+kubebuilder:validation:XValidation`` markers of ``apis/kueue/v1beta2``): a LocalQueue cannot
move to another ClusterQueue, an admitted Workload cannot change queue, time limit or priority
class, a flavor's tolerations must be well formed...  With kueued's CRDs the API server used to
store such updates, and kueued refused them afterwards (an ``Accepted=False`` condition, the
earlier version kept in force): ``kubectl apply`` said "configured" where on a Kueue cluster it
says what is wrong.  Now the API server refuses them with Kueue's own messages; kueued's own
validation (:mod:`kueued.model.validation`) still judges every object it reads, for clusters that
run Kueue's CRDs or objects stored before.

:data:`RULES` are Kueue's v1beta2 rules on the fields kueued's schemas type (by field path, as
:func:`kueued.kube.crds.schema` finds nodes: ``a.b[]`` is every item of list ``b``; ``""`` the
object itself).  The rules on what only other controllers write (topology assignments, admission
check updates, MultiKueue's cluster names) and on fields kueued does not model (a flavor's
``topologyName``) are left out.  :data:`LIMITS` are the ``maxItems``/``maxLength`` Kueue declares
on what the rules walk: the API server refuses a rule whose estimated cost has no bound, and
each limit is Kueue's own (the same constants kueued's validation uses), so an object they refuse
Kueue refuses too.
"""

from __future__ import annotations

from kueued.model.validation import clusterqueue, localqueue
from kueued.model.validation.clusterqueue import MAX_PER_GROUP, MAX_RESOURCE_GROUPS
from kueued.model.validation.workload import MAX_POD_SETS

__all__ = ["RULES", "LIMITS", "ENUMS", "LIST_MAPS"]

_RESERVED = "has(oldSelf.status) && has(oldSelf.status.conditions) && " \
            "oldSelf.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True')"
_STILL_RESERVED = "has(self.status) && has(self.status.conditions) && " \
                  "self.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True')"
_BOTH_REFS = "has(oldSelf.spec.priorityClassRef) && has(self.spec.priorityClassRef)"
_EFFECTS = "['NoSchedule', 'PreferNoSchedule', 'NoExecute']"
_SAME_WIDTH = ("self.flavors.all(x, size(x.resources) == size(self.coveredResources))",
               "flavors must have the same number of resources as the coveredResources")

RULES: dict[str, list[tuple[str, str, str]]] = {
    "LocalQueue": [
        ("spec.clusterQueue", "self == oldSelf", "field is immutable"),
    ],
    "ClusterQueue": [
        ("spec.flavorFungibility",
         "!has(self.preference) || (self.whenCanBorrow == 'TryNextFlavor' && self.whenCanPreempt == 'TryNextFlavor')",
         "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor"),
        ("spec.preemption",
         "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) && "
         " self.borrowWithinCohort.policy != 'Never')",
         "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"),
        ("spec.resourceGroups[]", *_SAME_WIDTH),
        ("spec",
         "!has(self.cohortName) && has(self.resourceGroups) ? self.resourceGroups.all(rg, rg.flavors.all(f, "
         "f.resources.all(r, !has(r.borrowingLimit)))) : true",
         "borrowingLimit must be nil when cohort is empty"),
    ],
    "Cohort": [
        ("spec.resourceGroups[]", *_SAME_WIDTH),
    ],
    "ResourceFlavor": [
        ("spec.nodeTaints", f"self.all(x, x.effect in {_EFFECTS})",
         "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"),
        ("spec.tolerations", "self.all(x, !has(x.key) ? x.operator == 'Exists' : true)",
         "operator must be Exists when 'key' is empty, which means 'match all values and all keys'"),
        ("spec.tolerations", "self.all(x, has(x.tolerationSeconds) ? x.effect == 'NoExecute' : true)",
         "effect must be 'NoExecute' when 'tolerationSeconds' is set"),
        ("spec.tolerations", "self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])",
         "supported toleration values: 'Equal'(default), 'Exists'"),
        ("spec.tolerations", "self.all(x, has(x.operator) && x.operator == 'Exists' ? !has(x.value) : true)",
         "a value must be empty when 'operator' is 'Exists'"),
        ("spec.tolerations", f"self.all(x, !has(x.effect) || x.effect in {_EFFECTS})",
         "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"),
    ],
    "Workload": [
        ("spec.podSets[]", "has(self.minCount) ? self.minCount <= self.count : true",
         "minCount should be positive and less or equal to count"),
        ("spec.priorityClassRef", "(self.group == 'scheduling.k8s.io') ? self.kind == 'PriorityClass' : true",
         "only the PriorityClass kind is allowed for the scheduling.k8s.io group"),
        ("spec.priorityClassRef", "(self.group == 'kueue.x-k8s.io') ? self.kind == 'WorkloadPriorityClass' : true",
         "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group"),
        ("spec", "!has(self.priorityClassRef) || has(self.priority)",
         "priority should not be nil when priorityClassRef is set"),
        ("", f"{_STILL_RESERVED} && has(self.status.admission) ? "
             "size(self.spec.podSets) == size(self.status.admission.podSetAssignments) : true",
         "podSetAssignments must have the same number of podSets as the spec"),
        ("", f"({_RESERVED}) ? (!has(oldSelf.spec.priorityClassRef) && !has(self.spec.priorityClassRef)) || "
             f"({_BOTH_REFS}) : true",
         "priorityClassRef is immutable while workload quota reserved"),
        ("", f"({_RESERVED} && {_BOTH_REFS}) ? "
             "oldSelf.spec.priorityClassRef.group == self.spec.priorityClassRef.group : true",
         "priorityClassRef.group is immutable while workload quota reserved"),
        ("", f"({_RESERVED} && {_BOTH_REFS}) ? "
             "oldSelf.spec.priorityClassRef.kind == self.spec.priorityClassRef.kind : true",
         "priorityClassRef.kind is immutable while workload quota reserved"),
        ("", f"({_RESERVED} && {_BOTH_REFS} && self.spec.priorityClassRef.group == 'scheduling.k8s.io' && "
             "self.spec.priorityClassRef.kind == 'PriorityClass') ? "
             "oldSelf.spec.priorityClassRef.name == self.spec.priorityClassRef.name : true",
         "priorityClassRef.name is immutable for scheduling.k8s.io/priorityclass while workload quota reserved"),
        ("", f"({_RESERVED}) && ({_STILL_RESERVED}) && has(oldSelf.spec.queueName) && has(self.spec.queueName) ? "
             "oldSelf.spec.queueName == self.spec.queueName : true",
         "queueName is immutable while workload quota reserved"),
        ("", f"(({_RESERVED.replace('QuotaReserved', 'Admitted')}) && "
             f"({_STILL_RESERVED.replace('QuotaReserved', 'Admitted')}))?"
             "((has(oldSelf.spec.maximumExecutionTimeSeconds)?oldSelf.spec.maximumExecutionTimeSeconds:0) ==  "
             "(has(self.spec.maximumExecutionTimeSeconds)?self.spec.maximumExecutionTimeSeconds:0)):true",
         "maximumExecutionTimeSeconds is immutable while workload quota reserved"),
    ],
}

_GROUPS = {"spec.resourceGroups": {"maxItems": MAX_RESOURCE_GROUPS},
           "spec.resourceGroups[].coveredResources": {"maxItems": MAX_PER_GROUP},
           "spec.resourceGroups[].flavors": {"maxItems": MAX_PER_GROUP},
           "spec.resourceGroups[].flavors[].resources": {"maxItems": MAX_PER_GROUP}}
_CONDITIONS = {"maxItems": 16}
_CONDITION_FIELDS = {"type": {"maxLength": 316}, "status": {"maxLength": 16}}

LIMITS: dict[str, dict[str, dict[str, int]]] = {
    "ClusterQueue": _GROUPS,
    "Cohort": _GROUPS,
    "ResourceFlavor": {"spec.nodeTaints": {"maxItems": 8}, "spec.tolerations": {"maxItems": 8}},
    "Workload": {"spec.podSets": {"maxItems": MAX_POD_SETS}, "status.conditions": _CONDITIONS,
                 **{f"status.conditions[].{k}": v for k, v in _CONDITION_FIELDS.items()},
                 "status.admission.podSetAssignments": {"maxItems": MAX_POD_SETS}},
}

ENUMS: dict[str, dict[str, tuple[str, ...]]] = {"ClusterQueue": clusterqueue.ENUMS, "LocalQueue": localqueue.ENUMS}
"""Kueue's enums (``+kubebuilder:validation:Enum``) by kind and field path: ``kubectl apply`` of a
``queueingStrategy: FIFO`` is refused at once, as on a Kueue cluster, instead of stored and then
refused by the daemon."""

_CONDITIONS_MAP: dict[str, tuple[str, ...]] = {"status.conditions": ("type",)}
_USAGE_MAPS: dict[str, tuple[str, ...]] = {
    "status.flavorsReservation": ("name",), "status.flavorsReservation[].resources": ("name",),
    "status.flavorsUsage": ("name",), "status.flavorsUsage[].resources": ("name",)}
LIST_MAPS: dict[str, dict[str, tuple[str, ...]]] = {
    "Workload": {**_CONDITIONS_MAP, "status.reclaimablePods": ("name",), "status.resourceRequests": ("name",)},
    "ClusterQueue": {**_CONDITIONS_MAP, **_USAGE_MAPS},
    "LocalQueue": {**_CONDITIONS_MAP, **_USAGE_MAPS},
    "Cohort": _CONDITIONS_MAP,
    "ElasticQuota": _CONDITIONS_MAP,
}
"""The lists Kueue's types key (``+listType=map +listMapKey=...``), by kind and path: a server-side
apply of one condition (a Job controller's ``Finished``) merges by type, as on a Kueue cluster,
instead of replacing the whole list (the Workload lost ``QuotaReserved`` and ``Admitted`` and kept
its ``status.admission``)."""
