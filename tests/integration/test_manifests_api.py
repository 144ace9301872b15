"""``kueued manifests`` against a real API server: the CRDs are structural and accepted, they take
every manifest kueued's own validation takes, and the RBAC grants what the daemon calls and no more.

The output of :func:`kueued.kube.manifests.render` is applied once per module, server-side,
as a user would pipe ``kueued manifests`` into ``kubectl apply``. The conformance scenarios
then go through a server-side dry run (nothing is stored): every object a fresh
:class:`~kueued.world.World` accepts, in each scenario's order, must be accepted by the API
server too. Objects live in namespaces that must exist, so those are created first.

The control plane is shared by the session, and a daemon test may read every queue in it:
objects created here carry a label and are deleted when the module ends, and they live in
namespaces prefixed ``kueued-it-`` (namespaces are never deleted: without a controller
manager, a deleted namespace stays Terminating).  The namespace is no part of a CRD's
schema, so moving an object changes nothing the dry run checks.
"""

from __future__ import annotations

import collections
import copy
import glob
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kueued.kube.crds import KINDS, KUEUE_DEFAULTS
from kueued.kube.manifests import render
from kueued.manifests import read_manifests
from kueued.world import Change, World

pytestmark = pytest.mark.control_plane

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT.parent / "shared" / "conformance" / "scenarios"
EXAMPLES = ROOT / "config" / "examples"
USER = "kueued"
EVENTUALLY_S = 30.0
CRD_KINDS = {k.kind: k for k in KINDS}
BATCH = 400  # objects per dry-run call: one kubectl start-up amortised, output still small
LABEL = {"kueued-it": "manifests"}  # on everything stored here, so the module can delete it
NS_PREFIX = "kueued-it-"


def _eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + EVENTUALLY_S
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {EVENTUALLY_S:.0f}s")
        time.sleep(0.2)


def _apply(cluster, docs: list[dict[str, Any]] | str, *extra: str, kubeconfig: Path | None = None,
           check: bool = True):
    # JSON, not YAML: kubectl's YAML is 1.1, where a name such as `y` is a boolean.
    stream = docs if isinstance(docs, str) else json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    return cluster.kubectl_run("apply", "--server-side", "--force-conflicts", "--field-manager=kueued-it", *extra,
                               "-f", "-", stdin=stream, kubeconfig=kubeconfig, check=check)


def _store(cluster, docs: list[dict[str, Any]]) -> None:
    """Apply for real, labelled so the module's teardown finds them."""
    labelled = copy.deepcopy(docs)
    for doc in labelled:
        doc["metadata"]["labels"] = {**(doc["metadata"].get("labels") or {}), **LABEL}
    _apply(cluster, labelled)


def _relocated(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest without its status, in this module's own copy of its namespace."""
    out = copy.deepcopy(manifest)
    out.pop("status", None)
    if ns := out["metadata"].get("namespace"):
        out["metadata"]["namespace"] = NS_PREFIX + ns
    return out


@pytest.fixture(scope="module")
def installed(control_plane) -> Iterator[Any]:
    _apply(control_plane, render(user=USER))
    names = [f"crd/{k.name}" for k in KINDS]
    control_plane.kubectl_run("wait", "--for=condition=Established", "--timeout=60s", *names)
    yield control_plane
    kinds = ",".join(k.name for k in KINDS)
    selector = ",".join(f"{k}={v}" for k, v in LABEL.items())
    control_plane.kubectl_run("delete", kinds, "--all-namespaces", "-l", selector, "--wait=false")


@pytest.fixture(scope="module")
def as_kueued(installed) -> Path:
    """A kubeconfig for user ``kueued``, once the authorizer has seen its bindings."""
    kubeconfig = installed.user_kubeconfig(USER)
    _eventually(lambda: installed.kubectl_run("get", "workloads", "-A", kubeconfig=kubeconfig,
                                              check=False).returncode == 0, f"{USER} listing workloads")
    return kubeconfig


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return obj["kind"], meta.get("namespace") or "", meta["name"]


def _ensure_namespaces(cluster, names: set[str]) -> None:
    docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in sorted(names)]
    if docs:
        _apply(cluster, docs)


# --- the CRDs ---------------------------------------------------------------------------------------

def test_every_crd_is_established_under_kueues_names(installed):
    listed = {item["metadata"]["name"]: item for item in installed.kubectl_json("get", "crd")["items"]}
    for kind in KINDS:
        crd = listed[kind.name]
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions.get("Established") == "True", (kind.kind, conditions)
        assert conditions.get("NamesAccepted") == "True", (kind.kind, conditions)
        # Structural and otherwise sound: the server reports no NonStructuralSchema problem.
        assert "NonStructuralSchema" not in conditions, (kind.kind, crd["status"]["conditions"])
        assert conditions.get("KubernetesAPIApprovalPolicyConformant", "True") == "True", kind.kind
        accepted = crd["status"]["acceptedNames"]
        assert accepted["kind"] == kind.kind and accepted["plural"] == kind.plural
        assert accepted.get("shortNames", []) == list(kind.short_names)
        assert crd["spec"]["scope"] == ("Namespaced" if kind.namespaced else "Cluster")
        assert crd["status"]["storedVersions"] == [kind.version]


def test_the_example_organisation_is_created_and_reads_back_as_written(installed):
    manifests, problems = read_manifests([EXAMPLES / "organisation.yaml"])
    assert not problems
    ours = [_relocated(m) for m in manifests if m["kind"] in CRD_KINDS]
    assert any(m["kind"] == "ClusterQueue" for m in ours)
    _ensure_namespaces(installed, {ns for m in ours if (ns := m["metadata"].get("namespace"))})
    _store(installed, ours)
    for manifest in ours:
        kind, namespace, name = _key(manifest)
        got = installed.kubectl_json("get", CRD_KINDS[kind].name, name, *(["-n", namespace] if namespace else []))
        # Nothing pruned: the spec is the one applied, with Kueue's defaults filled in.
        assert got.get("spec") == _defaulted(kind, manifest).get("spec"), (kind, name)


def _defaulted(kind: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """``manifest`` as the API server stores it: each of Kueue's defaults set where its field is
    missing under an object that exists (KUEUE_DEFAULTS lists a parent before its fields)."""
    out = copy.deepcopy(manifest)
    for path, value in KUEUE_DEFAULTS.get(kind, {}).items():
        *parents, field = path.split(".")
        holders = [out]
        for part in parents:
            step = part.removesuffix("[]")
            holders = [h[step] for h in holders if isinstance(h.get(step), (dict, list))]
            if part.endswith("[]"):
                holders = [item for h in holders for item in h]
        for holder in holders:
            if isinstance(holder, dict):
                holder.setdefault(field, copy.deepcopy(value))
    return out


def test_kueue_s_defaults_are_filled_in_as_on_a_kueue_cluster(installed):
    """``kubectl get cq -o wide`` shows the strategy of a queue that does not set it, as Kueue's CRD does."""
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "it-defaults"},
          "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
              {"name": "a", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]}}
    _store(installed, [cq])
    got = installed.kubectl_json("get", "clusterqueues.kueue.x-k8s.io", "it-defaults")["spec"]
    assert (got["queueingStrategy"], got["stopPolicy"]) == ("BestEffortFIFO", "None")
    assert got["preemption"] == {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never",
                                 "borrowWithinCohort": {"policy": "Never"}}
    assert got["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
    assert got == _defaulted("ClusterQueue", cq)["spec"]


def test_fields_kueued_does_not_model_are_kept(installed):
    """Fields Kueue declares and kueued does not type (admission checks, a TAS request, a pod
    template) are stored whole and read back as written."""
    ns = NS_PREFIX + "unmodelled"
    _ensure_namespaces(installed, {ns})
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "it-unmodelled"},
          "spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "prov", "onFlavors": ["a"]}]},
                   "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                       {"name": "a", "resources": [{"name": "cpu", "nominalQuota": 4}]}]}]}}
    wl = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
          "metadata": {"name": "it-unmodelled", "namespace": ns},
          "spec": {"queueName": "q", "podSets": [{
              "name": "main", "count": 2, "topologyRequest": {"required": "cloud.com/rack"},
              "template": {"metadata": {"labels": {"app": "x"}}, "spec": {
                  "restartPolicy": "Never",
                  "securityContext": {"runAsNonRoot": True},
                  "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1"],
                                  "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                                                "claims": [{"name": "gpu"}]}}]}}}]}}
    _store(installed, [cq, wl])
    got_cq = installed.kubectl_json("get", "clusterqueues.kueue.x-k8s.io", "it-unmodelled")
    got_wl = installed.kubectl_json("get", "workloads.kueue.x-k8s.io", "it-unmodelled", "-n", ns)
    assert got_cq["spec"] == _defaulted("ClusterQueue", cq)["spec"]
    assert got_wl["spec"] == _defaulted("Workload", wl)["spec"]


@pytest.mark.parametrize(("manifest", "field"), [
    pytest.param({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "it-v1beta1"},
                  "spec": {"cohort": "org"}}, "cohort", id="cq-v1beta1-cohort"),
    pytest.param({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                  "metadata": {"name": "it-typo", "namespace": "default"},
                  "spec": {"queuename": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": {}}}]}},
                 "queuename", id="workload-typo"),
    pytest.param({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                  "metadata": {"name": "it-request-typo", "namespace": "default"},
                  "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                      "containers": [{"name": "c", "resources": {"request": {"cpu": "100"}}}]}}}]}},
                 "request", id="pod-template-typo"),
    pytest.param({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "it-deep"},
                  "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                      {"name": "a", "resources": [{"name": "cpu", "nominalQuota": 1, "borrowLimit": 2}]}]}]}},
                 "borrowLimit", id="cq-nested-typo"),
    pytest.param({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                  "metadata": {"name": "it-lq-typo", "namespace": "default"},
                  "spec": {"clusterQueue": "x", "weight": 2}}, "weight", id="localqueue-typo"),
])
def test_kubectl_refuses_a_field_kueues_schema_does_not_declare(installed, manifest, field):
    """kubectl validates fields strictly by default: as against Kueue's CRDs, the apply fails and names the field."""
    refused = _apply(installed, [manifest], "--dry-run=server", check=False)
    assert refused.returncode != 0 and f'unknown field "{field}"' in refused.stderr, refused.stderr


def test_the_plain_stream_applies_over_one_with_a_user_without_conflicts(installed):
    """``make dev-cluster`` applies ``kueued manifests --user kueued`` as field manager ``kueued``;
    a user then pipes the plain ``kueued manifests`` into ``kubectl apply --server-side`` (its own
    manager, no ``--force-conflicts``), as the README says: nothing may conflict."""
    user = "it-reapply"
    try:
        installed.kubectl_run("apply", "--server-side", "--force-conflicts", "--field-manager=kueued", "-f", "-",
                              stdin=render(user=user))
        again = installed.kubectl_run("apply", "--server-side", "--field-manager=it-reapplier", "-f", "-",
                                      stdin=render(), check=False)
        assert again.returncode == 0, again.stderr
        binding = installed.kubectl_json("get", "clusterrolebinding", "kueued")
        assert {s["kind"] for s in binding["subjects"]} == {"ServiceAccount"}
    finally:
        installed.kubectl_run("delete", "clusterrolebinding", f"kueued:user:{user}", "--ignore-not-found")
        installed.kubectl_run("delete", "rolebinding", "-n", "kueued-system", f"kueued:user:{user}",
                              "--ignore-not-found")


@pytest.mark.parametrize(("manifest", "path"), [
    pytest.param({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "it-bad-q"},
                  "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                      {"name": "a", "resources": [{"name": "cpu", "nominalQuota": "ten"}]}]}]}},
                 "nominalQuota", id="quantity-pattern"),
    pytest.param({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                  "metadata": {"name": "it-bad-count", "namespace": "default"},
                  "spec": {"podSets": [{"name": "main", "count": "three", "template": {"spec": {}}}]}},
                 "spec.podSets[0].count", id="count-integer"),
    pytest.param({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
                  "metadata": {"name": "it-bad-eq", "namespace": "default"}, "spec": {"max": {"cpu": "lots"}}},
                 "spec.max.cpu", id="elastic-quota-quantity"),
    pytest.param({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "it-fifo"},
                  "spec": {"queueingStrategy": "FIFO"}}, "spec.queueingStrategy", id="enum-queueing-strategy"),
    pytest.param({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "it-grab"},
                  "spec": {"preemption": {"reclaimWithinCohort": "Always"}}}, "spec.preemption.reclaimWithinCohort",
                 id="enum-preemption"),
    pytest.param({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                  "metadata": {"name": "it-halt", "namespace": "default"},
                  "spec": {"clusterQueue": "x", "stopPolicy": "Stop"}}, "spec.stopPolicy", id="enum-stop-policy"),
])
def test_the_schema_enforces_types(installed, manifest, path):
    refused = _apply(installed, [manifest], "--dry-run=server", check=False)
    assert refused.returncode != 0 and path in refused.stderr, refused.stderr


# --- the status kueued writes -------------------------------------------------------------------------

CONDITION = {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "ok",
             "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}
USAGE = [{"name": "on-demand", "resources": [{"name": "cpu", "total": "3", "borrowed": "1"}]}]
STATUSES = {
    "Workload": {"admission": {"clusterQueue": "it-status", "podSetAssignments": [
        {"name": "main", "flavors": {"cpu": "on-demand"}, "resourceUsage": {"cpu": "3", "memory": "1Gi"},
         "count": 3}]}, "conditions": [CONDITION]},
    "ClusterQueue": {"pendingWorkloads": 2, "reservingWorkloads": 1, "admittedWorkloads": 1,
                     "flavorsReservation": USAGE, "flavorsUsage": USAGE, "conditions": [CONDITION | {"type": "Active"}],
                     "fairSharing": {"weightedShare": 250}},
    "LocalQueue": {"pendingWorkloads": 2, "reservingWorkloads": 1, "admittedWorkloads": 1,
                   "flavorsReservation": USAGE, "flavorsUsage": USAGE, "conditions": [CONDITION | {"type": "Active"}],
                   "fairSharing": {"weightedShare": 0}},
    "Cohort": {"fairSharing": {"weightedShare": 9223372036854775807}},
    "ElasticQuota": {"used": {"cpu": "2", "memory": "4Gi"},
                     "conditions": [CONDITION | {"type": "Valid", "status": "False", "reason": "Refused"}]},
}


def test_kueued_can_write_kueues_status_shapes(installed, as_kueued):
    ns = NS_PREFIX + "status"
    _ensure_namespaces(installed, {ns})
    objects = {
        "Workload": {"metadata": {"name": "it-status", "namespace": ns},
                     "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 3, "template": {"spec": {}}}]}},
        "ClusterQueue": {"metadata": {"name": "it-status"}, "spec": {}},
        "LocalQueue": {"metadata": {"name": "it-status", "namespace": ns}, "spec": {"clusterQueue": "it-status"}},
        "Cohort": {"metadata": {"name": "it-status"}, "spec": {}},
        "ElasticQuota": {"metadata": {"name": "it-status", "namespace": ns}, "spec": {"max": {"cpu": 4}}},
    }
    for kind, obj in objects.items():
        crd = CRD_KINDS[kind]
        _store(installed, [{"apiVersion": crd.api_version, "kind": kind, **obj}])
        where = ["-n", obj["metadata"]["namespace"]] if crd.namespaced else []
        resource = f"{crd.plural}.{crd.group}"
        # As kueued's own user, through the status subresource only, as kueued writes it: a merge
        # patch and nothing else (kubectl patch would read the subresource first, which the
        # least-privilege role does not grant)
        _patch_status(as_kueued, kind, obj["metadata"].get("namespace"), obj["metadata"]["name"],
                      {"status": STATUSES[kind]})
        got = installed.kubectl_json("get", resource, obj["metadata"]["name"], *where)
        assert got["status"] == STATUSES[kind], kind


def _patch_status(kubeconfig: Path, kind: str, namespace: str | None, name: str, body: dict[str, Any]) -> None:
    import anyio

    from kueued.kube.connect import connect

    async def main() -> None:
        async with await connect(kubeconfig) as kube:
            await kube.patch_status(kind, namespace, name, body)
    anyio.run(main)


# --- every manifest kueued accepts, the API server accepts ---------------------------------------------

def _scenario_files() -> list[Path]:
    files = [Path(f) for f in sorted(glob.glob(str(SCENARIOS / "**" / "*.yaml"), recursive=True))]
    return files + sorted(EXAMPLES.glob("*.yaml"))


def _accepted_by_kueued(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The CRD-kind objects a fresh World accepts, in the file's order; and how many it refused."""
    manifests, problems = read_manifests([path])
    assert not problems, problems
    world, accepted, refused = World(), [], 0
    for manifest in manifests:
        change, _ = world.apply(copy.deepcopy(manifest))
        if manifest.get("kind") not in CRD_KINDS:
            continue
        if change is Change.REJECTED:
            refused += 1
        else:
            accepted.append(_relocated(manifest))
    return accepted, refused


def _dry_run(cluster, objects: list[dict[str, Any]]) -> tuple[collections.Counter, str]:
    """Which objects a server-side dry run accepted (by kind, namespace, name), and its errors."""
    result = _apply(cluster, objects, "--dry-run=server", "-o", "json", check=False)
    out = json.loads(result.stdout) if result.stdout.strip() else {"kind": "List", "items": []}
    items = out["items"] if out.get("kind") == "List" else [out]
    return collections.Counter(_key(item) for item in items), result.stderr


def test_api_server_accepts_every_object_kueued_accepts(installed):
    by_file = {path: _accepted_by_kueued(path) for path in _scenario_files()}
    objects = [(path, obj) for path, (accepted, _) in by_file.items() for obj in accepted]
    assert len(by_file) > 200 and len(objects) > 1500  # the conformance suite is there
    _ensure_namespaces(installed, {ns for _, obj in objects if (ns := obj["metadata"].get("namespace"))})

    failures: list[str] = []
    for start in range(0, len(objects), BATCH):
        batch = objects[start:start + BATCH]
        expected = collections.Counter(_key(obj) for _, obj in batch)
        applied, errors = _dry_run(installed, [obj for _, obj in batch])
        if applied == expected:
            continue
        # Find the culprits one by one: only objects whose key came back short.
        short = {key for key in expected if applied[key] < expected[key]}
        for path, obj in batch:
            if _key(obj) in short:
                alone, error = _dry_run(installed, [obj])
                if not alone:
                    failures.append(f"{path.relative_to(path.parents[1])}: {'/'.join(_key(obj))}: {error.strip()}")
        assert failures or not errors, errors
    refused = sum(r for _, r in by_file.values())
    print(f"\n{len(objects)} objects kueued accepts from {len(by_file)} files: "
          f"{len(objects) - len(failures)} accepted by the API server; {refused} refused by kueued, not sent")
    assert not failures, "\n".join(failures)


# --- the RBAC -----------------------------------------------------------------------------------------

def _can(cluster, kubeconfig: Path, *args: str) -> bool:
    answer = cluster.kubectl_run("auth", "can-i", *args, kubeconfig=kubeconfig, check=False)
    return answer.stdout.strip() == "yes"


def test_user_kueued_gets_what_the_daemon_calls(installed, as_kueued):
    ns = NS_PREFIX + "rbac"
    _ensure_namespaces(installed, {ns})
    pod_sets = [{"name": "main", "count": 1, "template": {"spec": {}}}]
    _store(installed, [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                        "metadata": {"name": "it-rbac", "namespace": ns},
                        "spec": {"queueName": "q", "podSets": pod_sets}},
                       {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                        "metadata": {"name": "it-rbac"}, "spec": {}}])
    listed = installed.kubectl_json("get", "workloads.kueue.x-k8s.io", "-A", kubeconfig=as_kueued)
    assert ("it-rbac", ns) in {(i["metadata"]["name"], i["metadata"]["namespace"]) for i in listed["items"]}
    _patch_status(as_kueued, "Workload", ns, "it-rbac", {"status": {"conditions": [CONDITION]}})
    # merge patches only: no PUT of a status, no read of a status subresource
    assert _can(installed, as_kueued, "patch", "workloads.kueue.x-k8s.io", "--subresource=status", "-n", ns)
    assert not _can(installed, as_kueued, "update", "workloads.kueue.x-k8s.io", "--subresource=status", "-n", ns)

    deleted = installed.kubectl_run("delete", "clusterqueues.kueue.x-k8s.io", "it-rbac", kubeconfig=as_kueued,
                                    check=False)
    assert deleted.returncode != 0 and "forbidden" in deleted.stderr.lower()
    secret = installed.kubectl_run("create", "secret", "generic", "it-rbac", "-n", ns, "--from-literal=a=b",
                                   kubeconfig=as_kueued, check=False)
    assert secret.returncode != 0 and "forbidden" in secret.stderr.lower()
    # Writing a spec is the Job integration's (Workloads) or nobody's (queues, flavors: a merge patch
    # only puts Kueue's finalizer on a ClusterQueue or ResourceFlavor or takes it off, or the
    # kueued.io/in-force annotation on a refused object; never a PUT); leases only at home.
    assert _can(installed, as_kueued, "patch", "elasticquotas.scheduling.sigs.k8s.io", "-n", ns)
    assert _can(installed, as_kueued, "patch", "clusterqueues.kueue.x-k8s.io")
    assert not _can(installed, as_kueued, "update", "clusterqueues.kueue.x-k8s.io")
    assert _can(installed, as_kueued, "patch", "resourceflavors.kueue.x-k8s.io")
    assert not _can(installed, as_kueued, "update", "resourceflavors.kueue.x-k8s.io")
    assert _can(installed, as_kueued, "patch", "localqueues.kueue.x-k8s.io", "-n", ns)
    assert not _can(installed, as_kueued, "update", "localqueues.kueue.x-k8s.io", "-n", ns)
    assert _can(installed, as_kueued, "update", "leases.coordination.k8s.io", "-n", "kueued-system")
    assert not _can(installed, as_kueued, "update", "leases.coordination.k8s.io", "-n", ns)
    assert not _can(installed, as_kueued, "delete", "leases.coordination.k8s.io", "-n", "kueued-system")


# --- the dev cluster ------------------------------------------------------------------------------------

def test_dev_cluster_provision_applies_the_same_stream(installed, cp_binaries):
    if cp_binaries is None:
        pytest.skip("an external cluster: provision runs the locally built kubectl")
    from kueued.devcluster.dev import provision

    said: list[str] = []
    provision(installed.kubeconfig, cp_binaries, said.append)  # again: server-side apply is idempotent
    assert said and "CRDs and RBAC" in said[-1]
    role = installed.kubectl_json("get", "clusterrole", "kueued")
    assert role["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kueued"


def test_another_controller_s_applied_condition_merges_by_type(installed, as_kueued):
    """Kueue's Workload conditions are a list keyed by type: a Job controller that applies only its
    ``Finished`` condition (server-side apply, its own field manager) leaves kueued's ``QuotaReserved``
    in place, as on a Kueue cluster, instead of replacing the whole list."""
    ns = NS_PREFIX + "ssa"
    _ensure_namespaces(installed, {ns})
    crd = CRD_KINDS["Workload"]
    meta = {"name": "it-ssa", "namespace": ns}
    pod_sets = [{"name": "main", "count": 1, "template": {"spec": {}}}]
    _store(installed, [{"apiVersion": crd.api_version, "kind": "Workload", "metadata": meta,
                        "spec": {"queueName": "q", "podSets": pod_sets}}])
    _patch_status(as_kueued, "Workload", ns, "it-ssa", {"status": STATUSES["Workload"]})
    condition = {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "done",
                 "lastTransitionTime": "2026-01-01T00:00:01Z"}
    finished = {"apiVersion": crd.api_version, "kind": "Workload", "metadata": meta,
                "status": {"conditions": [condition]}}
    installed.kubectl_run("apply", "--server-side", "--subresource=status", "--field-manager=job-controller",
                          "-f", "-", stdin=json.dumps(finished))
    got = installed.kubectl_json("get", f"{crd.plural}.{crd.group}", "it-ssa", "-n", ns)
    assert {c["type"] for c in got["status"]["conditions"]} == {"QuotaReserved", "Finished"}
