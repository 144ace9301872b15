"""The daemon with ElasticQuota trees: objects come and go in its manifest directory.

Each test runs the daemon on a temporary directory with an injected clock.  After every
settled batch the next *step* runs: it records what the port saw, rewrites files and
moves the clock; when the steps run out the daemon is cancelled.  Assertions come after
the run, on the records.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import yaml
from structlog.testing import capture_logs

from actors.daemon import run_daemon
from kueued.kube.port import InMemoryPort
from kueued.model import koordinator as k
from tests.builders import namespace
from tests.elastic.builders import EQ, WL, configuration, node

Step = Callable[[], None]


class Clock:
    """The daemon's clock, moved by the test (seconds)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _write(path: Path, docs: list[dict[str, Any]]) -> None:
    path.write_text(yaml.safe_dump_all(docs))


def _run(tmp_path: Path, port: InMemoryPort, steps: list[Step], *, clock: Clock | None = None,
         watch: Callable[[Any], None] | None = None) -> int:
    """Run the daemon; after the n-th settled batch run ``steps[n]``; stop after the last one.
    ``watch(coordinator)`` sees each settled state first."""
    settled = 0

    def on_settled(coord: Any) -> None:
        nonlocal settled
        if watch is not None:
            watch(coord)
        settled += 1
        if settled <= len(steps):
            steps[settled - 1]()
        if settled >= len(steps):
            scope.cancel()

    async def main() -> None:
        nonlocal scope
        with anyio.fail_after(30) as scope:
            await run_daemon(tmp_path, port, interval=0.01, on_settled=on_settled, handle_signals=False,
                             clock=clock or Clock())

    scope: anyio.CancelScope
    anyio.run(main)
    return settled


def _admitted(port: InMemoryPort) -> set[str]:
    """Workloads whose last commit is an admission."""
    state: dict[str, str] = {}
    for c in port.log:
        state[c.workload] = c.kind
    return {w for w, kind in state.items() if kind == "admit"}


def _evicted(port: InMemoryPort) -> list[str]:
    return [c.workload for c in port.log if c.kind == "evict"]


def _amounts(port: InMemoryPort, quota: str) -> dict[str, dict[str, str]]:
    """The request and runtime annotations last written to ``quota``, decoded."""
    ann = port.annotations(quota)
    return {key.rsplit("/", 1)[1]: json.loads(ann[key]) for key in (k.ANNOTATION_REQUEST, k.ANNOTATION_RUNTIME)
            if key in ann}


def _teams(a_max: str = "10") -> list[dict[str, Any]]:
    return [
        EQ("cluster").cluster(cpu="10").build(),
        EQ("team-a").parent("cluster").min(cpu="4").max(cpu=a_max).build(),
        EQ("team-b").parent("cluster").min(cpu="6").max(cpu="10").build(),
    ]


def test_daemon_admits_by_runtime_and_publishes_request_and_runtime(tmp_path: Path) -> None:
    _write(tmp_path / "quotas.yaml", _teams())
    _write(tmp_path / "jobs.yaml", [WL("a1", "team-a").req(cpu="6").at(1).build(),
                                    WL("a2", "team-a").req(cpu="3").at(2).build(),
                                    WL("b1", "team-b").req(cpu="4").at(3).build()])
    port = InMemoryPort()
    records: list[Any] = []
    _run(tmp_path, port, [lambda: records.append((_admitted(port), list(port.quota_status)))])

    admitted, status = records[0]
    # requests a 9, b 4: b lends what it does not use; a gets its min 4 plus the 2 left
    assert admitted == {"default/a1", "default/b1"}
    assert _amounts(port, "team-a") == {"request": {"cpu": "9"}, "runtime": {"cpu": "6"}}
    assert _amounts(port, "team-b") == {"request": {"cpu": "4"}, "runtime": {"cpu": "4"}}
    # the cluster group does not lend: its request is raised to its min, its runtime is the total
    assert _amounts(port, "cluster") == {"request": {"cpu": "13"}, "runtime": {"cpu": "10"}}
    # written once per quota, with the quota's namespace; the built-in groups have no object
    assert sorted((s.quota, s.namespace) for s in status if s.annotations) == [
        ("cluster", "kube-system"), ("team-a", "kube-system"), ("team-b", "kube-system")]
    # status.used, as Koordinator's controller writes it: what the subtree's admitted workloads hold
    assert {s.quota: s.used for s in status if s.used is not None} == {
        "team-a": {"cpu": "6"}, "team-b": {"cpu": "4"}, "cluster": {"cpu": "10"}}


def _made_at(quota: dict[str, Any], second: int) -> dict[str, Any]:
    quota["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:{second:02d}Z"
    return quota


def test_the_first_list_is_validated_as_the_quotas_were_made_not_by_name(tmp_path: Path) -> None:
    """Listed by name, children come before their parent and the later sibling before the earlier
    one; Koordinator's webhook met them as they were made: parent, then zz-first (fits the parent's
    min), then aa-late (would sum above it: refused)."""
    parent = _made_at(EQ("parent").parent("cluster").min(cpu="6").max(cpu="10").build(), 2)
    parent["metadata"]["labels"][k.LABEL_IS_PARENT] = "true"
    _write(tmp_path / "a.yaml", [_made_at(EQ("aa-late").parent("parent").min(cpu="4").max(cpu="10").build(), 4),
                                 _made_at(EQ("zz-first").parent("parent").min(cpu="4").max(cpu="10").build(), 3)])
    _write(tmp_path / "b.yaml", [_made_at(EQ("cluster").cluster(cpu="10").build(), 1), parent])
    _write(tmp_path / "c.yaml", [WL("w", "zz-first").req(cpu="2").at(1).build()])
    port = InMemoryPort()
    with capture_logs() as logs:
        _run(tmp_path, port, [lambda: None])
    refused = {e["object"] for e in logs if e.get("event") == "object_rejected"}
    assert refused == {"ElasticQuota/kube-system/aa-late"}
    assert _admitted(port) == {"default/w"} and [c.cluster_queue for c in port.log] == ["zz-first"]


def test_a_removed_workload_frees_quota_and_a_pending_one_is_admitted(tmp_path: Path) -> None:
    """b1's removal lowers b's request; the runtime b no longer needs flows to a, and a1 fits."""
    _write(tmp_path / "quotas.yaml", _teams())
    _write(tmp_path / "a.yaml", [WL("a1", "team-a").req(cpu="6").at(1).build()])
    _write(tmp_path / "b.yaml", [WL("b1", "team-b").req(cpu="6").at(2).build()])
    port = InMemoryPort()
    seen: list[tuple[set[str], dict[str, Any], dict[str, Any]]] = []

    def record() -> None:
        seen.append((_admitted(port), _amounts(port, "team-a"), _amounts(port, "team-b")))

    def remove_b1() -> None:
        record()
        (tmp_path / "b.yaml").unlink()

    _run(tmp_path, port, [remove_b1, record])
    # b uses its whole min 6: a has its min 4, and a1 (6) waits
    assert seen[0] == ({"default/b1"}, {"request": {"cpu": "6"}, "runtime": {"cpu": "4"}},
                       {"request": {"cpu": "6"}, "runtime": {"cpu": "6"}})
    # b1 is gone (a deletion is no commit, so its admission stays the last word on it): b lends
    # everything, a's runtime grows to its request and a1 is admitted
    assert seen[1][0] == {"default/a1", "default/b1"}
    assert seen[1][1] == {"request": {"cpu": "6"}, "runtime": {"cpu": "6"}}
    # b's request and runtime fell to nothing, written as Koordinator writes them: no workload, no
    # request key; the runtime on max's keys, 0
    assert seen[1][2] == {"request": {}, "runtime": {"cpu": "0"}}
    used = [s.used for s in port.quota_status if s.quota == "team-b" and s.used is not None]
    assert used == [{"cpu": "6"}, {"cpu": None}]  # a merge patch: the key goes once nothing holds it


def test_finishing_frees_runtime_for_the_next_workload(tmp_path: Path) -> None:
    _write(tmp_path / "quotas.yaml", _teams())
    jobs = [WL("a1", "team-a").req(cpu="4").at(1).build(), WL("a2", "team-a").req(cpu="4").at(2).build()]
    _write(tmp_path / "jobs.yaml", jobs)
    _write(tmp_path / "b.yaml", [WL("b1", "team-b").req(cpu="6").at(3).build()])
    port = InMemoryPort()
    seen: list[set[str]] = []

    def finish_a1() -> None:
        seen.append(_admitted(port))
        _write(tmp_path / "jobs.yaml", jobs[1:])

    _run(tmp_path, port, [finish_a1, lambda: seen.append(_admitted(port))])
    # a 8 + b 6 = 14 > 10: a gets 4 (its min), a1 fits and a2 waits
    assert seen[0] == {"default/a1", "default/b1"}
    # a1 finished: its 4 cpu are free again and a2 takes them
    assert seen[1] == {"default/a1", "default/a2", "default/b1"}
    assert [c.workload for c in port.log if c.kind == "admit"].count("default/a2") == 1


def _lower_a_max(tmp_path: Path, *, monitor: bool | None,
                 later: list[tuple[float, bool]]) -> list[tuple[float, list[str]]]:
    """team-a runs 8 cpu; at 100 s its max drops to 4 (over its runtime from then on, delay 30 s); then
    for each (time, nudge) of ``later`` the clock moves there and, with nudge, a new file makes the
    daemon settle again.  What was evicted at each settle, with the clock."""
    _write(tmp_path / "config.yaml", [configuration(delay_evict_time="30s", monitor_all_quotas=monitor)])
    _write(tmp_path / "quotas.yaml", _teams())
    _write(tmp_path / "jobs.yaml", [WL("a1", "team-a").req(cpu="8").at(1).build()])
    port = InMemoryPort()
    clock = Clock()
    seen: list[tuple[float, list[str]]] = []

    def record() -> None:
        seen.append((clock.now, _evicted(port)))

    def lower_max() -> None:
        record()
        clock.now = 100.0
        _write(tmp_path / "quotas.yaml", _teams(a_max="4"))

    def step(at: float, nudge: bool) -> Step:
        def go() -> None:
            record()
            clock.now = at
            if nudge:
                _write(tmp_path / f"nudge-{at:g}.yaml", [namespace(f"nudge-{at:g}")])
        return go

    _run(tmp_path, port, [lower_max, *(step(at, nudge) for at, nudge in later), record], clock=clock)
    assert _amounts(port, "team-a")["runtime"] == {"cpu": "4"}
    if monitor:
        assert "revoked" in next(c.detail for c in port.log if c.kind == "evict")
    return seen


def test_a_lowered_max_recycles_after_the_configured_delay_and_not_before(tmp_path: Path) -> None:
    # 29 s over: nothing yet (a new file makes the daemon settle again); 30 s over: the next poll
    # recycles although nothing changed
    seen = _lower_a_max(tmp_path, monitor=True, later=[(129.0, True), (130.0, False)])
    assert seen == [(0.0, []), (100.0, []), (129.0, []), (130.0, ["default/a1"])]


def test_the_daemon_recycles_nothing_unless_monitor_all_quotas_is_on(tmp_path: Path) -> None:
    """Koordinator's QuotaOverUsedRevokeController runs only with monitorAllQuotas (default false)."""
    seen = _lower_a_max(tmp_path, monitor=None, later=[(1000.0, True)])
    assert seen == [(0.0, []), (100.0, []), (1000.0, [])]  # over its runtime, and kept


def test_removing_a_node_scales_the_mins_at_once(tmp_path: Path) -> None:
    _write(tmp_path / "config.yaml", [configuration(delay_evict_time="0s", monitor_all_quotas=True)])
    _write(tmp_path / "nodes.yaml", [node("n1", cpu="8")])
    _write(tmp_path / "n2.yaml", [node("n2", cpu="8")])
    _write(tmp_path / "quotas.yaml", [EQ("a").min(cpu="6").max(cpu="10").build(),
                                      EQ("b").min(cpu="6").max(cpu="10").build()])
    _write(tmp_path / "jobs.yaml", [WL("a1", "a").req(cpu="6").at(1).build(),
                                    WL("b1", "b").req(cpu="6").at(2).build()])
    port = InMemoryPort()
    seen: list[tuple[Any, ...]] = []

    def record() -> None:
        seen.append((_admitted(port), _amounts(port, "a")["runtime"], _amounts(port, "b")["runtime"]))

    def remove_n2() -> None:
        record()
        (tmp_path / "n2.yaml").unlink()

    _run(tmp_path, port, [remove_n2, record])
    # 16 cpu: both fit in their mins
    assert seen[0] == ({"default/a1", "default/b1"}, {"cpu": "6"}, {"cpu": "6"})
    # 8 cpu < mins 12: each min scaled to floor(8 * 6 / 12) = 4, and with no delay both are recycled
    assert seen[1] == (set(), {"cpu": "4"}, {"cpu": "4"})
    assert sorted(_evicted(port)) == ["default/a1", "default/b1"]


def test_a_bad_elastic_quota_gets_a_condition_and_the_others_carry_on(tmp_path: Path) -> None:
    bad = EQ("team-c").parent("cluster").min(cpu="5").max(cpu="2").build()
    _write(tmp_path / "quotas.yaml", [*_teams(), bad])
    _write(tmp_path / "jobs.yaml", [WL("a1", "team-a").req(cpu="2").at(1).build()])
    port = InMemoryPort()
    seen: list[Any] = []

    def fix() -> None:
        seen.append((_admitted(port), port.condition("team-c", "Accepted")))
        _write(tmp_path / "quotas.yaml", [*_teams(), EQ("team-c").parent("cluster").min(cpu="0").max(cpu="2").build()])

    with capture_logs() as logs:
        _run(tmp_path, port, [fix, lambda: seen.append(port.condition("team-c", "Accepted"))])

    admitted, refused = seen[0]
    assert admitted == {"default/a1"}
    assert (refused.status, refused.reason) == ("False", "ValidationFailed")
    assert "min 5 > max 2" in refused.message
    warning = next(e for e in logs if e["event"] == "object_rejected")
    assert warning["log_level"] == "warning" and warning["object"] == "ElasticQuota/kube-system/team-c"
    # the corrected version is accepted: the condition flips back, and team-c gets its annotations
    assert (seen[1].status, seen[1].reason) == ("True", "Valid")
    # team-c is idle and lends: request and runtime are zero, which is what an absent annotation
    # means, so nothing is written (Koordinator compares without zeros)
    assert port.annotations("team-c") == {}


def test_a_quota_refused_for_a_missing_parent_gets_in_once_the_parent_exists(tmp_path: Path) -> None:
    """Without a webhook the API server keeps a child made before its parent: refused then (its parent
    does not exist), it is tried again when the quotas change and gets in, and a workload naming it
    is admitted there; a sibling whose min would sum above the parent's stays refused."""
    _write(tmp_path / "quotas.yaml", [EQ("cluster").cluster(cpu="10").build(),
                                      EQ("child").parent("team").min(cpu="2").max(cpu="4").build()])
    port = InMemoryPort()
    seen: list[Any] = []
    team = EQ("team").parent("cluster").min(cpu="3").max(cpu="10").build()
    team["metadata"]["labels"][k.LABEL_IS_PARENT] = "true"

    def add_parent() -> None:
        seen.append(port.condition("child", "Accepted"))
        _write(tmp_path / "quotas.yaml", [EQ("cluster").cluster(cpu="10").build(),
                                          EQ("child").parent("team").min(cpu="2").max(cpu="4").build(),
                                          EQ("sibling").parent("team").min(cpu="2").max(cpu="4").build()])
        _write(tmp_path / "team.yaml", [team])

    def submit() -> None:
        seen.append((port.condition("child", "Accepted"), port.condition("sibling", "Accepted")))
        _write(tmp_path / "jobs.yaml", [WL("w", "child").req(cpu="3").at(1).build()])

    _run(tmp_path, port, [add_parent, submit, lambda: seen.append(_admitted(port))])

    refused, (child, sibling), admitted = seen
    assert (refused.status, refused.reason) == ("False", "ValidationFailed")
    assert "team does not exist" in refused.message
    assert (child.status, child.reason) == ("True", "Valid")
    assert (sibling.status, sibling.reason) == ("False", "ValidationFailed")  # 2 + 2 > the parent's min 3
    assert admitted == {"default/w"} and [c.cluster_queue for c in port.log] == ["child"]


def test_a_workload_waiting_in_an_elastic_quota_says_why_in_numbers(tmp_path: Path) -> None:
    _write(tmp_path / "quotas.yaml", _teams())
    _write(tmp_path / "jobs.yaml", [WL("a1", "team-a").req(cpu="6").at(1).build(),
                                    WL("a2", "team-a").req(cpu="3").at(2).build(),
                                    WL("b1", "team-b").req(cpu="4").at(3).build()])
    port = InMemoryPort()
    _run(tmp_path, port, [lambda: None])
    assert _admitted(port) == {"default/a1", "default/b1"}
    assert set(port.pending_reasons) == {"default/a2"}  # nothing said of the admitted ones
    assert port.pending_reasons["default/a2"].startswith("quota team-a: cpu")


def test_a_refused_deletion_keeps_the_quota_until_its_children_are_gone(tmp_path: Path) -> None:
    """Without a webhook the API server deletes a parent quota that still has a child; Koordinator's
    webhook would refuse that, so the parent stays in force (its child keeps its runtime and a workload
    is still admitted there).  Once the child is deleted too, the parent's deletion passes: it goes."""
    team = EQ("team").parent("cluster").min(cpu="3").max(cpu="10").build()
    team["metadata"]["labels"][k.LABEL_IS_PARENT] = "true"
    _write(tmp_path / "cluster.yaml", [EQ("cluster").cluster(cpu="10").build()])
    _write(tmp_path / "team.yaml", [team])
    _write(tmp_path / "child.yaml", [EQ("child").parent("team").min(cpu="2").max(cpu="4").build()])
    port = InMemoryPort()
    quotas: list[set[str]] = []
    steps: list[Step] = [
        lambda: (tmp_path / "team.yaml").unlink(),
        lambda: _write(tmp_path / "jobs.yaml", [WL("w", "child").req(cpu="3").at(1).build()]),
        lambda: ((tmp_path / "child.yaml").unlink(), (tmp_path / "jobs.yaml").unlink()),
        lambda: None,
    ]
    with capture_logs() as logs:
        _run(tmp_path, port, steps,
             watch=lambda coord: quotas.append({key.rsplit("/", 1)[1] for key in coord.world.elastic_quotas}))

    assert quotas[0] >= {"cluster", "team", "child"}
    assert "team" in quotas[1]  # deleted with a child under it: refused, in force
    refused = [e for e in logs if e.get("event") == "object_rejected" and e.get("object", "").endswith("/team")]
    assert refused and "child quotas (child)" in refused[0]["reason"]
    assert _admitted(port) == {"default/w"} and [c.cluster_queue for c in port.log][0] == "child"
    assert "team" not in quotas[-1] and "child" not in quotas[-1]  # the child went, and the parent after it
    assert any(e.get("event") == "elastic_quota_deleted" and e.get("object", "").endswith("/team") for e in logs)


def test_a_malformed_quota_in_the_first_list_or_a_retry_is_refused_and_the_daemon_goes_on(tmp_path: Path) -> None:
    """The first list's quotas are put in creation order before they are validated, and refused ones
    are tried again when quotas change: metadata that is no mapping (labels an integer, metadata a
    list) is refused by name there, never a crash, and the well-formed quotas still admit."""
    bad_labels = EQ("odd").min(cpu="1").max(cpu="2").build()
    bad_labels["metadata"]["labels"] = -1
    bad_meta = EQ("worse").min(cpu="1").max(cpu="2").build()
    bad_meta["metadata"] = ["worse"]
    _write(tmp_path / "quotas.yaml", [*_teams(), bad_labels, bad_meta])
    port = InMemoryPort()
    with capture_logs() as logs:
        settled = _run(tmp_path, port, [
            lambda: _write(tmp_path / "more.yaml", [EQ("team-c").parent("cluster").min(cpu="0").max(cpu="4").build(),
                                                    WL("a1", "team-a").req(cpu="2").at(1).build()]),
            lambda: None])
    assert settled == 2
    refused = {e["object"]: e["reason"] for e in logs if e.get("event") == "object_rejected"}
    assert "metadata.labels" in refused["ElasticQuota/kube-system/odd"]
    assert any("metadata: must be a mapping" in why for why in refused.values())
    assert _admitted(port) == {"default/a1"}
