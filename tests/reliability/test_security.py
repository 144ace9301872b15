"""Security, measured against the code: the RBAC grants what the code calls and nothing else, the
probes and metrics stay on this host unless asked, and TLS verification is off only by a flag that
says so in the log (issue 18).

The RBAC check reads the API calls out of ``kueued/kube/*.py`` with :mod:`ast`: every use of a
:class:`~kueued.kube.client.KubeClient` method (called, or taken as a value and called later) on a
client-like receiver, with the kind it is given.  A kind named by a constant resolves itself; a kind
computed at run time (``follow.kind``) must be listed in :data:`DYNAMIC` with the kinds it can be, so
a new call site fails this test until someone says what it touches.  The table of calls is then held
against the ClusterRole and Role ``kueued manifests`` prints, both ways.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from kueued.cli import _parser
from kueued.config import DEFAULTS, FLAGS, Config, with_flags
from kueued.health import Health, HealthServer
from kueued.kube import client as kube_client
from kueued.kube.client import EVENT, JOB, KINDS, LEASE, Kind
from kueued.kube.finalizers import PATCHED_KINDS
from kueued.kube.manifests import render
from kueued.kube.status_publisher import VALIDATED_KINDS
from kueued.kube.tree_status import STATUS_KINDS

KUBE = Path(kube_client.__file__).parent

# KubeClient's methods (and KubeLeases' replace) -> (RBAC verb, on the status subresource?)
VERBS: dict[str, tuple[str, bool]] = {
    "list": ("list", False), "get": ("get", False), "watch": ("watch", False), "create": ("create", False),
    "delete": ("delete", False), "patch": ("patch", False), "patch_json": ("patch", False),
    "replace": ("update", False),
    "patch_status": ("patch", True), "replace_status": ("update", True), "create_event": ("create", False),
}
HTTP_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
RECEIVERS = frozenset({"self.client", "self._client", "self.kube", "client", "kube"})

DYNAMIC: dict[tuple[str, str], tuple[frozenset[Kind], str]] = {
    ("ClusterSource", "follow.kind"): (frozenset({*KINDS.values(), JOB}),
                               "ClusterSource follows KINDS for the scheduler and (Job, Workload) for the Job "
                               "controller (cli.py, jobs.py)"),
    ("TreeStatusPublisher", "desired.kind"): (frozenset(KINDS[k] for k in STATUS_KINDS),
                                           "the tree status and Accepted conditions: STATUS_KINDS only"),
    ("KubeLeases", "kind"): (frozenset({LEASE}), "KubeLeases serves the LeaderElector, which names LEASE only"),
    ("finalizers", "kind"): (frozenset(KINDS[k] for k in PATCHED_KINDS), "Kueue's finalizer: PATCHED_KINDS only"),
    ("Retention", "kind"): (frozenset({KINDS["Workload"], JOB}),
                            "object retention deletes a finished Workload or the Job of one Kueue deactivated"),
    ("InForceWriter", "kind"): (frozenset(KINDS[k] for k in VALIDATED_KINDS),
                                "the kueued.io/in-force annotation on a refused object: the kinds kueued validates"),
}
"""Call sites whose kind is computed: (the class they are in, the kind expression) -> (the kinds it can be, why)."""

IMPLIED: dict[tuple[str, str, str], str] = {
    ("batch", "jobs/finalizers", "update"):
        "no call: the OwnerReferencesPermissionEnforcement admission plugin requires it of whoever creates a "
        "Workload whose ownerReference to its Job sets blockOwnerDeletion (jobs.py creates those)",
}
"""Granted though no call names it, because the API server requires it of a call that is made."""

EXCESS: dict[tuple[str, str, str], str] = {}
"""Granted and never called: none (the role grants exactly what the code calls; a grant added without
a call fails here, as a call added without a grant does)."""


class Call:
    def __init__(self, module: str, line: int, method: str, kinds: frozenset[Kind], verb: str, status: bool) -> None:
        self.module, self.line, self.method, self.kinds, self.verb, self.status = (module, line, method, kinds,
                                                                                    verb, status)

    def grants(self) -> set[tuple[str, str, str]]:
        suffix = "/status" if self.status else ""
        return {(k.group, k.plural + suffix, self.verb) for k in self.kinds}


def _kind_of(expr: ast.expr, module: Any, name: str, owner: str) -> frozenset[Kind]:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return frozenset({KINDS[expr.value]})
    if isinstance(expr, ast.Name) and isinstance(getattr(module, expr.id, None), Kind):
        return frozenset({getattr(module, expr.id)})
    source = ast.unparse(expr)
    if (owner, source) not in DYNAMIC:
        raise AssertionError(f"kueued/kube/{name}.py:{expr.lineno}: a call on kind `{source}` in {owner}, computed "
                             "at run time: add the kinds it can be to DYNAMIC")
    return DYNAMIC[owner, source][0]


def _calls() -> Iterator[Call]:
    """Every API call kueued/kube makes, outside the client that defines them."""
    for path in sorted(KUBE.glob("*.py")):
        name = path.stem
        if name in ("client", "fencing"):  # the definitions, and a pass-through that adds no call of its own
            continue
        module = importlib.import_module(f"kueued.kube.{name}")
        tree = ast.parse(path.read_text())
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr in (*VERBS, "_call")
                    and ast.unparse(node.value) in RECEIVERS):
                continue
            parent = parents[node]
            if isinstance(parent, ast.Call) and parent.func is node:
                calls = [parent]
            else:  # taken as a value (`write = self.client.patch_status if ... else ...`), called by that name
                function = parent
                while not isinstance(function, ast.AsyncFunctionDef | ast.FunctionDef):
                    function = parents[function]
                assigned = next(p for p in (parent, parents[parent]) if isinstance(p, ast.Assign))
                alias = assigned.targets[0]
                assert isinstance(alias, ast.Name)
                calls = [c for c in ast.walk(function) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                         and c.func.id == alias.id]
                assert calls, f"{path.name}:{node.lineno}: {alias.id} is never called"
            owner = parent
            while not isinstance(owner, ast.ClassDef | ast.Module):
                owner = parents[owner]
            where = owner.name if isinstance(owner, ast.ClassDef) else name
            for call in calls:
                if node.attr == "_call":  # the raw request path: ("PUT", kind.path(...))
                    method, target = call.args[0], call.args[1]
                    assert isinstance(method, ast.Constant) and isinstance(target, ast.Call)
                    assert isinstance(target.func, ast.Attribute) and target.func.attr == "path"
                    status = any(isinstance(a, ast.Constant) and a.value == "status" for a in target.args)
                    yield Call(name, call.lineno, "_call", _kind_of(target.func.value, module, name, where),
                               HTTP_VERBS[method.value], status)
                    continue
                verb, status = VERBS[node.attr]
                if node.attr == "create_event":
                    kinds = frozenset({EVENT})
                else:
                    assert call.args and not isinstance(call.args[0], ast.Starred), ast.unparse(call)
                    kinds = _kind_of(call.args[0], module, name, where)
                yield Call(name, call.lineno, node.attr, kinds, verb, status)


def _granted() -> tuple[set[tuple[str, str, str]], set[tuple[str, str, str]]]:
    """(the ClusterRole's grants, the Role's grants) as ``kueued manifests`` prints them."""
    docs = {d["kind"]: d for d in yaml.safe_load_all(render(crds=False, rbac=True))}

    def grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
        return {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
                for v in rule["verbs"]}
    return grants(docs["ClusterRole"]), grants(docs["Role"])


def test_the_scan_finds_the_calls_we_know_of() -> None:
    """The scanner itself: a few calls read by eye from the code must be in its table."""
    found = {(c.module, c.method) for c in _calls()}
    assert {("commits", "patch_status"), ("commits", "patch"), ("watch", "list"), ("watch", "watch"),
            ("job_writes", "create"), ("job_writes", "delete"), ("events", "create_event"),
            ("status_publisher", "patch_status")} <= found
    assert {("job_writes", "patch"), ("job_writes", "patch_status")} <= found  # taken as values, then called
    assert any(c.method == "_call" and c.grants() == {("coordination.k8s.io", "leases", "update")}
               for c in _calls())  # KubeLeases' PUT through the raw request path


def test_every_call_the_code_makes_is_granted() -> None:
    cluster, namespaced = _granted()
    missing = {}
    for call in _calls():
        for grant in call.grants():
            where = namespaced if grant[1] == "leases" else cluster
            if grant not in where:
                missing[grant] = f"kueued/kube/{call.module}.py:{call.line} ({call.method})"
    assert missing == {}


def test_nothing_is_granted_that_no_call_needs() -> None:
    cluster, namespaced = _granted()
    called = {g for call in _calls() for g in call.grants()}
    unused = (cluster | namespaced) - called - IMPLIED.keys()
    assert unused == EXCESS.keys(), "update EXCESS: the unused grants changed"
    assert namespaced == {("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")}
    assert not {g for g in cluster if g[1] == "leases"}  # another controller's lease is out of reach


# --- metrics and health bind to this host unless configured ------------------------------------------

def _settled(*argv: str) -> Config:
    """``run``'s settings as ``kueued run`` settles them: its flags over the defaults (kueued.config)."""
    args = _parser().parse_args(["run", *argv])
    return with_flags(DEFAULTS, {dest: getattr(args, dest, None) for dest in FLAGS.values()})


def test_run_serves_metrics_on_localhost_and_not_at_all_by_default() -> None:
    assert (_settled().metrics.address, _settled().metrics.port) == ("127.0.0.1", 0)
    assert _settled("--metrics-address", "0.0.0.0").metrics.address == "0.0.0.0"  # only when configured


@pytest.mark.parametrize(("given", "bound"), [
    pytest.param({}, "127.0.0.1", id="default"),
    pytest.param({"host": "0.0.0.0"}, "0.0.0.0", id="configured"),
])
def test_the_health_server_binds_where_it_is_told_and_localhost_otherwise(given: dict[str, str],
                                                                          bound: str) -> None:
    with HealthServer(Health(), CollectorRegistry(), **given) as server:
        assert server._server.server_address[0] == bound
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=5) as answer:
            assert answer.status == 200


# --- TLS verification ---------------------------------------------------------------------------------

TOKEN = "s3cr3t-token-never-logged"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kubeconfig(path: Path, *, insecure: bool) -> Path:
    cluster: dict[str, Any] = {"server": f"https://127.0.0.1:{_free_port()}"}  # nobody listens: kueued retries
    if insecure:
        cluster["insecure-skip-tls-verify"] = True
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": cluster}],
        "users": [{"name": "t", "user": {"token": TOKEN}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}]}))
    return path


def _run_until(kubeconfig: Path, *flags: str, until: str = "watch_restarted") -> list[dict[str, Any]]:
    """`kueued run` against an unreachable server, stopped (SIGTERM) once it logs ``until``."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    proc = subprocess.Popen([sys.executable, "-m", "kueued.cli", "--log-format", "json", "--log-level", "INFO",
                             "run", "--kubeconfig", str(kubeconfig), "--no-job-integration", *flags],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    assert proc.stderr is not None
    events: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    try:
        for line in proc.stderr:  # waits on the log line itself, not on a sleep
            events.append(json.loads(line))
            if events[-1].get("event") == until or time.monotonic() > deadline:
                break
    finally:
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=30)
    events.extend(json.loads(line) for line in rest.splitlines())
    assert any(e.get("event") == until for e in events), events[-5:]
    assert TOKEN not in json.dumps(events)  # no token reaches a log line
    return events


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("insecure_kubeconfig", "flags", "by"), [
    pytest.param(False, (), None, id="verified-by-default"),
    pytest.param(False, ("--insecure-skip-tls-verify",), "flag", id="flag-warns"),
    pytest.param(True, (), "kubeconfig", id="kubeconfig-honoured-and-warns"),
])
def test_tls_verification_is_on_unless_a_flag_turns_it_off_with_a_warning(
        tmp_path: Path, insecure_kubeconfig: bool, flags: tuple[str, ...], by: str | None) -> None:
    events = _run_until(_kubeconfig(tmp_path / "kc", insecure=insecure_kubeconfig), *flags)
    disabled = [e for e in events if e.get("event") == "tls_verification_disabled"]
    if by is None:
        assert disabled == []
    else:
        assert [(e["level"], e["by"]) for e in disabled] == [("warning", by)]
    assert _settled().kube.insecure_skip_tls_verify is False
    assert _settled("--insecure-skip-tls-verify").kube.insecure_skip_tls_verify is True
