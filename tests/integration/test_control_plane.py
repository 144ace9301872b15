"""The local control plane is a real one: versioned, storing, extensible, authorising, and leak-free.

Each test talks to the apiserver only through ``kubectl``, as a developer would, so a
failure here is about the control plane and not about a Python client. Names carry a
random suffix so the tests also run against a shared external cluster.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kueued.devcluster.versions import KUBERNETES_VERSION

# Bounded waits for what the apiserver does asynchronously (CRD establishment, RBAC caches).
EVENTUALLY_S = 30.0

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.it.kueued.io
spec:
  group: it.kueued.io
  scope: Cluster
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, minimum: 1}
"""


def _suffix() -> str:
    return uuid.uuid4().hex[:8]


def _eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + EVENTUALLY_S
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {EVENTUALLY_S:.0f}s")
        time.sleep(0.2)


def test_server_reports_the_release_we_built(control_plane):
    version = control_plane.kubectl_json("version")
    if control_plane.control_plane is not None:
        assert version["serverVersion"]["gitVersion"] == KUBERNETES_VERSION
        assert version["serverVersion"]["gitTreeState"] == "clean"
        assert version["clientVersion"]["gitVersion"] == KUBERNETES_VERSION
    else:
        assert version["serverVersion"]["gitVersion"].startswith("v1.")


def test_namespace_round_trips(control_plane):
    name = f"it-ns-{_suffix()}"
    control_plane.kubectl_run("create", "namespace", name)
    listed = control_plane.kubectl_json("get", "namespaces")
    assert name in {item["metadata"]["name"] for item in listed["items"]}
    got = control_plane.kubectl_json("get", "namespace", name)
    assert got["metadata"]["uid"] and got["status"]["phase"] == "Active"


def test_crd_applied_server_side_serves_custom_objects(control_plane):
    control_plane.kubectl_run("apply", "--server-side", "--field-manager=kueued-it", "-f", "-", stdin=CRD)
    control_plane.kubectl_run("wait", "--for=condition=Established", "--timeout=60s",
                              "crd/widgets.it.kueued.io")
    name = f"w-{_suffix()}"
    widget = {"apiVersion": "it.kueued.io/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"size": 3}}
    control_plane.kubectl_run("create", "-f", "-", stdin=json.dumps(widget))
    got = control_plane.kubectl_json("get", "widgets", name)
    assert got["spec"] == {"size": 3}
    # The schema is enforced: the apiserver, not kubectl, refuses a size below its minimum.
    bad = widget | {"metadata": {"name": f"{name}-bad"}, "spec": {"size": 0}}
    refused = control_plane.kubectl_run("create", "-f", "-", stdin=json.dumps(bad), check=False)
    assert refused.returncode != 0 and "spec.size" in refused.stderr


def test_rbac_is_enforced_for_a_minted_user(control_plane):
    user = f"it-user-{_suffix()}"
    kubeconfig = control_plane.user_kubeconfig(user, groups=["kueued-it"])
    denied = control_plane.kubectl_run("get", "namespaces", kubeconfig=kubeconfig, check=False)
    assert denied.returncode != 0
    assert "forbidden" in denied.stderr.lower() and f'"{user}"' in denied.stderr

    role = f"{user}-ns-reader"
    control_plane.kubectl_run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all([
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": role},
         "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": role},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]},
    ]))
    # The authorizer reads bindings from an informer: allowed once its watch has caught up.
    _eventually(lambda: control_plane.kubectl_run("get", "namespaces", kubeconfig=kubeconfig,
                                                  check=False).returncode == 0, f"{user} listing namespaces")
    # Only what was granted: writing is still refused.
    still_denied = control_plane.kubectl_run("create", "namespace", f"{user}-ns", kubeconfig=kubeconfig,
                                             check=False)
    assert still_denied.returncode != 0 and "forbidden" in still_denied.stderr.lower()


def _processes_mentioning(text: str) -> list[int]:
    """Pids of live processes whose command line contains ``text`` (our state dir, say)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if text in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _gone(pid: int) -> bool:
    """No such process, or only a zombie waiting for a reaper (it runs nothing any more)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_stopping_leaves_no_process_and_no_state(cp_binaries):
    if cp_binaries is None:
        pytest.skip("an external cluster: no local binaries to start a second control plane with")
    from kueued.devcluster.controlplane import ControlPlane

    extra = ["--max-requests-inflight=5000", "--max-mutating-requests-inflight=2500"]
    cp = ControlPlane(binaries=cp_binaries, apiserver_args=extra)
    with cp:
        pids = cp.pids
        assert len(pids) == 2 and not any(_gone(pid) for pid in pids)
        apiserver_cmdline = Path(f"/proc/{cp.apiserver.pid}/cmdline").read_bytes().decode().split("\0")
        assert set(extra) <= set(apiserver_cmdline)
        state_dir = cp.state_dir
        assert _processes_mentioning(str(state_dir))
    assert all(_gone(pid) for pid in pids)
    assert _processes_mentioning(str(state_dir)) == []
    assert not state_dir.exists()


def test_up_and_down_manage_a_detached_cluster(cp_binaries, tmp_path):
    if cp_binaries is None:
        pytest.skip("an external cluster: `up` starts a local one")
    state_dir = tmp_path / "dev-cluster"

    def devcluster(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kueued.devcluster", *args, "--state-dir", str(state_dir)],
                              capture_output=True, text=True, timeout=240)

    started = devcluster("up")
    try:
        assert started.returncode == 0, started.stderr
        assert "export KUBECONFIG=" in started.stdout
        ready = json.loads((state_dir / "ready.json").read_text())
        kubectl = state_dir / "bin" / "kubectl"
        assert kubectl.resolve() == cp_binaries.kubectl
        listed = subprocess.run([str(kubectl), "--kubeconfig", str(state_dir / "kubeconfig"),
                                 f"--cache-dir={tmp_path / 'cache'}", "get", "ns", "-o", "name"],
                                capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0, listed.stderr
        assert "namespace/default" in listed.stdout.split()
    finally:
        stopped = devcluster("down")
    assert stopped.returncode == 0, stopped.stderr
    assert not state_dir.exists()
    pids = [int(ready["supervisor"]), *(int(p) for p in ready["pids"].values())]
    assert all(_gone(pid) for pid in pids)
