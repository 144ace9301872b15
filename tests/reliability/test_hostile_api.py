"""The hostile corpus through a real API server, with ``kueued run`` watching (issue 18).

Each document of ``corpus/*.yaml`` is applied as ``kubectl apply --server-side`` applies it (a strict
server-side apply, sent straight to the API); the files kubectl must read itself (non-UTF-8, an alias
bomb, ``!!binary``) and the two big generated ones go through ``kubectl`` as they are.  Some never get
past ``kubectl`` or the API server (a quantity the CRD's pattern refuses, an unknown top-level field
under strict field validation, a name that is not a DNS subdomain); the rest are stored, and kueued
must refuse the bad ones itself: an ``object_rejected`` log line naming the object and the field.
Meanwhile the daemon must not crash, every line it writes is JSON, and a good Workload submitted after
all of it is admitted.

Which objects were refused where, how long the good Workload took, and the daemon's peak memory go
to ``build/reliability/hostile_api.json`` (summarised in ``docs/reliability.md``).  Every object is
named ``hostile-*`` or ``zz-good*`` and deleted at the end: the cluster is shared with other tests.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueued.kube.client import KINDS
from kueued.manifests import read_manifests
from kueued.model.api import object_key
from kueued.world import World
from tests.integration.daemon import Daemon
from tests.reliability.api import KUEUE, Admin, ApiFailure, Credentials
from tests.reliability.conftest import record
from tests.reliability.corpus.generate import LABEL
from tests.reliability.test_fuzz_objects import (
    CORPUS,
    GOOD,
    GOOD_CQ,
    GOOD_NS,
    assert_names_a_field,
    corpus_files,
)

WHOLE = {"non-utf8.yaml", "alias-bomb.yaml", "binary-names.yaml", "cohort-chain-1000.yaml", "podsets-10000.yaml"}
"""Files applied in one go: unreadable as a whole, or too many documents for one kubectl each."""


@pytest.fixture
def daemon(installed: Any, tmp_path: Path) -> Iterator[Daemon]:
    d = Daemon(installed, tmp_path / "kueued.log").start()
    try:
        yield d
    finally:
        if d.proc is not None and d.proc.poll() is None:
            d.stop()
        _clean(installed)


def _clean(cluster: Any) -> None:
    """Delete every object of ours, whatever state the test left: one request per kind (a collection
    delete by the corpus label), as the admin, so 1,000 Cohorts go in a second, not in minutes."""
    admin = Admin(Credentials(cluster.kubeconfig))
    selector = "?labelSelector=" + ",".join(f"{k}%3D{v}" for k, v in LABEL.items())
    for path in (*(f"{KUEUE}/{p}" for p in ("clusterqueues", "cohorts", "resourceflavors", "workloadpriorityclasses")),
                 *(f"{KUEUE}/namespaces/hostile/{p}" for p in ("workloads", "localqueues")),
                 "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/hostile/elasticquotas"):
        admin.request("DELETE", path + selector)
    for path in ("workloads", "localqueues"):
        admin.request("DELETE", f"{KUEUE}/namespaces/{GOOD_NS}/{path}")
    for path in (f"clusterqueues/{GOOD_CQ}", "resourceflavors/zz-good-flavor"):
        try:
            admin.request("DELETE", f"{KUEUE}/{path}")
        except ApiFailure as exc:
            if exc.status != 404:
                raise


def _apply(cluster: Any, text: bytes, tmp: Path) -> tuple[bool, str]:
    """``kubectl apply --server-side`` of a file: the bytes go as they are, UTF-8 or not."""
    path = _write(tmp / "apply.yaml", text)
    done = cluster.kubectl_run("apply", "--server-side", "--force-conflicts", "-f", str(path), check=False)
    return done.returncode == 0, done.stderr.strip()


def _apply_document(admin: Admin, manifest: Any) -> tuple[bool, str]:
    """One document as ``kubectl apply --server-side`` sends it (a strict server-side apply), straight to
    the API: a process per document would cost a second each.  What kubectl would refuse before
    sending (no kind, no name, a kind the server does not serve) is refused here the same way."""
    meta = manifest.get("metadata") if isinstance(manifest, dict) else None
    kind_name = manifest.get("kind") if isinstance(manifest, dict) else None
    kind = KINDS.get(kind_name) if isinstance(kind_name, str) else None
    if kind is None or manifest.get("apiVersion") != kind.api_version or not isinstance(meta, dict) \
            or not meta.get("name"):
        return False, "error: refused by kubectl before sending: no kind the server serves, or no name"
    path = kind.path(meta.get("namespace") or None, str(meta["name"]))
    try:
        admin.request("PATCH", path + "?fieldManager=kubectl&force=true&fieldValidation=Strict", manifest,
                      content_type="application/apply-patch+yaml")
    except ApiFailure as exc:  # its text is "422: " and the start of the Status object
        message = re.search(r'"message":"((?:[^"\\]|\\.)*)', str(exc))
        return False, f"Error from server ({exc.status}): " + (message.group(1) if message else str(exc))
    return True, ""


def _where_refused(stderr: str) -> str:
    """The API server answers ``Error from server`` or ``... is invalid``; kubectl refuses the rest itself
    (what it cannot parse, or name, before sending anything)."""
    return "api-server" if "Error from server" in stderr or " is invalid" in stderr else "kubectl"


@pytest.mark.timeout(600)
def test_the_daemon_refuses_hostile_objects_by_name_and_keeps_admitting(daemon: Daemon, tmp_path: Path) -> None:
    cluster = daemon.cluster
    files = [p for p in corpus_files(tmp_path) if p.name != "base.yaml"]
    ok, why = _apply(cluster, (CORPUS / "base.yaml").read_bytes(), tmp_path)
    assert ok, why
    stored: list[dict[str, Any]] = []
    per_file: dict[str, Any] = {}
    keys: dict[str, set[str]] = {}  # file -> the objects it holds
    started = time.perf_counter()
    admin = Admin(Credentials(cluster.kubeconfig))
    for path in files:
        outcome: dict[str, Any] = {"applied": 0, "refused_before_kueued": []}
        if path.name in WHOLE:  # through kubectl itself: its YAML reader is part of what is tried
            results = [(_apply(cluster, path.read_bytes(), tmp_path), read_manifests([path]).manifests)]
        else:
            results = [(_apply_document(admin, doc), [doc]) for doc in yaml.safe_load_all(path.read_bytes())]
        keys[path.name] = {object_key(m) for _, manifests in results for m in manifests if isinstance(m, dict)}
        for (ok, why), manifests in results:
            outcome["applied"] += 1
            if ok:
                stored.extend(manifests)
            else:
                outcome["refused_before_kueued"].append({"by": _where_refused(why), "why": why.splitlines()[-1][:300]})
        per_file[path.name] = outcome
    hostile_seconds = time.perf_counter() - started

    # What kueued must refuse of what the API server stored: the same rules, in process.
    world = World()
    for manifest in [*read_manifests([CORPUS / "base.yaml"]).manifests, *stored]:
        world.apply(manifest)
    expected = {key: reason for key, reason in world.rejected.items() if key.split("/")[-1].startswith("hostile")}

    submitted = time.perf_counter()
    ok, why = _apply(cluster, yaml.safe_dump_all([_unstamped(m) for m in GOOD]).encode(), tmp_path)
    assert ok, why
    cluster.kubectl_run("wait", "-n", "zz-good", f"--for=jsonpath={{.status.admission.clusterQueue}}={GOOD_CQ}",
                        "--timeout=180s", "workload/zz-good-wl")
    admitted_after = time.perf_counter() - submitted

    # Each kind has its own watch: the good Workload's admission does not order the other kinds' events.
    inactive_expected = {"hostile-cq-cycle", "hostile-cq-deep"}  # a cycle, a 1,000-level chain

    def logged(evs: list[dict[str, Any]]) -> bool:
        return (set(expected) <= {e.get("object") for e in evs if e.get("event") == "object_rejected"}
                and inactive_expected <= {e.get("cluster_queue") for e in evs
                                          if e.get("event") == "cluster_queue_inactive"})
    waited = time.perf_counter()
    events = _events_until(daemon, logged)
    waited = time.perf_counter() - waited
    assert daemon.proc is not None and daemon.proc.poll() is None, daemon.tail()  # alive through all of it
    peak_rss_mb = _peak_rss_mb(daemon.proc.pid)
    assert not [e for e in events if e.get("level") in ("error", "critical") or "exception" in e], \
        [e for e in events if e.get("level") in ("error", "critical") or "exception" in e][:3]
    rejected = {e["object"]: e["reason"] for e in events if e.get("event") == "object_rejected"}
    missing = sorted(set(expected) - set(rejected))
    assert missing == [], f"refused in process but never logged by the daemon: {missing[:5]}"
    for key, reason in rejected.items():
        assert_names_a_field(key, reason)
    inactive = {e.get("cluster_queue") for e in events if e.get("event") == "cluster_queue_inactive"}
    assert inactive_expected <= inactive  # accepted, but inactive, and the daemon says why

    for name, outcome in per_file.items():
        outcome["refused_by_kueued"] = sorted(k for k in rejected if k in keys[name])
    body = {"files": per_file, "objects_stored": len(stored),
            "refused_before_kueued": sum(len(o["refused_before_kueued"]) for o in per_file.values()),
            "refused_by_kueued": len([k for k in rejected if k.split("/")[-1].startswith("hostile")]),
            "seconds_to_apply_corpus": round(hostile_seconds, 1),
            "seconds_to_admit_good_workload_after": round(admitted_after, 2),
            "seconds_until_every_refusal_logged": round(waited, 2),
            "daemon_peak_rss_mb": peak_rss_mb, "daemon_log_lines": len(events)}
    record("hostile_api", body)
    stopping = time.perf_counter()
    assert daemon.stop() == 0  # and it stops cleanly on SIGTERM
    print(f"hostile corpus: {json.dumps({**body, 'files': len(per_file)})}, stopped in "
          f"{time.perf_counter() - stopping:.1f} s")


def _events_until(daemon: Daemon, done: Callable[[list[dict[str, Any]]], bool],
                  timeout: float = 60) -> list[dict[str, Any]]:
    """The daemon's log (every line JSON, or this raises) once ``done`` holds of it, or at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        events = daemon.events()
        if done(events) or time.monotonic() > deadline:
            return events
        time.sleep(0.2)  # the log is a file: read again until the lines are there


def _write(path: Path, text: bytes) -> Path:
    path.write_bytes(text)
    return path


def _unstamped(manifest: dict[str, Any]) -> dict[str, Any]:
    manifest = json.loads(json.dumps(manifest))
    manifest["metadata"].pop("creationTimestamp", None)  # the API server stamps it
    return manifest


def _peak_rss_mb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    line = next((x for x in status.splitlines() if x.startswith("VmHWM:")), None)
    return round(int(line.split()[1]) / 1024, 1) if line else None
