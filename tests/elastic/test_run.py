"""run_elastic: admission, preemption inside a group, forced recycling; scenario replay."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kueued.model import koordinator as k
from kueued.model.elastic_validation import validate_elastic_quota
from kueued.model.quantity import parse
from kueued.scheduling.elastic import run_elastic, workload_requests
from tests.elastic.builders import EQ, WL, milli, node

SCENARIOS = Path(__file__).resolve().parents[2].parent / "shared" / "conformance" / "scenarios"


def _two_teams(**team_max: str) -> list[dict]:
    return [
        EQ("cluster").cluster(cpu="10").build(),
        EQ("team-a").parent("cluster").min(cpu="5").max(**(team_max or {"cpu": "10"})).build(),
        EQ("team-b").parent("cluster").min(cpu="5").max(**(team_max or {"cpu": "10"})).build(),
    ]


def test_admits_up_to_runtime_and_reports_why_not():
    out = run_elastic(
        _two_teams(),
        [WL("a-1", "team-a").req(cpu="6").build(), WL("a-2", "team-a").req(cpu="4").build(),
         WL("b-1", "team-b").req(cpu="3").build()],
        [],
    )
    # team-a requests 10, team-b 3: runtimes 7 and 3.
    assert out.quota_groups["team-a"].runtime == milli(cpu="7")
    assert out.workloads["default/a-1"].state == "admitted"
    assert out.workloads["default/a-1"].cluster_queue == "team-a"
    pending = out.workloads["default/a-2"]
    assert pending.state == "pending" and pending.cluster_queue is None
    assert pending.reason == "quota team-a: cpu used 6 + request 4 > runtime 7"


def test_pending_workload_does_not_block_later_ones():
    out = run_elastic(
        _two_teams(),
        [WL("big", "team-a").req(cpu="11").build(), WL("small", "team-a").req(cpu="1").build()],
        [],
    )
    assert out.workloads["default/big"].state == "pending"
    assert out.workloads["default/small"].state == "admitted"


def test_queue_order_is_priority_then_creation():
    out = run_elastic(
        _two_teams(),
        [WL("early", "team-a").req(cpu="3").at(1).build(),
         WL("urgent", "team-a").req(cpu="3").priority(5).at(2).build(),
         WL("late", "team-a").req(cpu="2").at(3).build(),
         WL("b", "team-b").req(cpu="5").at(4).build()],
        [],
    )
    # team-a requests 8 but team-b holds its min 5: runtime 5. urgent goes first, then
    # early no longer fits (6 > 5) and late still does (5 <= 5).
    states = {key: w.state for key, w in out.workloads.items()}
    assert states == {"default/urgent": "admitted", "default/early": "pending",
                      "default/late": "admitted", "default/b": "admitted"}


def test_preemption_evicts_lowest_priority_of_the_same_group_only():
    out = run_elastic(
        _two_teams(),
        [WL("a-low", "team-a").req(cpu="3").priority(1).admitted().build(),
         WL("a-mid", "team-a").req(cpu="2").priority(2).admitted().build(),
         WL("b-low", "team-b").req(cpu="5").priority(0).admitted().build(),
         WL("a-high", "team-a").req(cpu="3").priority(9).build()],
        [],
    )
    # team-a requests 8 but only gets its min 5 (team-b holds the other 5).
    assert out.workloads["default/a-high"].state == "admitted"
    assert out.workloads["default/a-low"].preemptions == 1
    assert out.workloads["default/a-mid"].preemptions == 0
    assert out.workloads["default/b-low"].state == "admitted"


def test_no_preemption_when_it_cannot_make_room():
    out = run_elastic(
        _two_teams(),
        [WL("a-low", "team-a").req(cpu="1").priority(1).admitted().build(),
         WL("a-high", "team-a").req(cpu="9").priority(9).build(),
         WL("b-1", "team-b").req(cpu="5").admitted().build()],
        [],
    )
    assert out.workloads["default/a-high"].state == "pending"
    assert out.workloads["default/a-low"].preemptions == 0


def test_forced_recycling_gives_back_what_fits():
    quotas = [EQ("cluster").cluster(cpu="10").build(),
              EQ("team").parent("cluster").min(cpu="0").max(cpu="20").build()]
    workloads = [WL("p1", "team").req(cpu="6").priority(3).admitted().build(),
                 WL("p2", "team").req(cpu="5").priority(2).admitted().build(),
                 WL("p3", "team").req(cpu="3").priority(1).admitted().build()]
    out = run_elastic(quotas, workloads, [])
    # used 14 > runtime 10: take p3 (11), p2 (6); give back p2? 11 > 10 no; p3? 9 yes.
    assert out.workloads["default/p2"].state == "pending"
    assert out.workloads["default/p2"].preemptions == 1
    assert out.workloads["default/p3"].state == "admitted"
    assert out.workloads["default/p3"].preemptions == 0


def test_non_preemptible_is_limited_by_min_and_never_revoked():
    quotas = [EQ("cluster").cluster(cpu="10").build(),
              EQ("team").parent("cluster").min(cpu="2").max(cpu="20").build(),
              EQ("other").parent("cluster").min(cpu="0").max(cpu="20").build()]
    out = run_elastic(quotas, [
        WL("keep", "team").req(cpu="2").non_preemptible().build(),
        WL("over", "team").req(cpu="1").non_preemptible().build(),
    ], [])
    assert out.workloads["default/keep"].state == "admitted"
    assert out.workloads["default/over"].reason == (
        "quota team: cpu non-preemptible used 2 + request 1 > min 2")


def test_unlabelled_and_unknown_workloads_use_the_default_group():
    quotas = [*_two_teams(), EQ(k.DEFAULT_QUOTA, "koordinator-system").max(cpu="2").build()]
    out = run_elastic(quotas, [WL("plain").req(cpu="2").build(),
                               WL("typo", "team-z").req(cpu="1").build()], [])
    assert out.workloads["default/plain"].cluster_queue == k.DEFAULT_QUOTA
    assert out.workloads["default/typo"].state == "pending"
    assert out.quota_groups[k.DEFAULT_QUOTA].runtime == milli(cpu="2")


def test_namespace_association():
    quotas = [*_two_teams(), EQ("team-c").parent("cluster").max(cpu="10").namespaces("apps").build(),
              EQ("ml", "ml").parent("cluster").max(cpu="10").build()]
    out = run_elastic(quotas, [WL("x", namespace="apps").req(cpu="1").build(),
                               WL("y", namespace="ml").req(cpu="1").build()], [])
    assert out.workloads["apps/x"].cluster_queue == "team-c"
    assert out.workloads["ml/y"].cluster_queue == "ml"


def test_parent_quota_takes_no_workloads():
    quotas = [EQ("cluster").cluster(cpu="10").build(),
              EQ("dept").parent("cluster").is_parent().max(cpu="10").build()]
    out = run_elastic(quotas, [WL("w", "dept").req(cpu="1").build()], [])
    assert out.workloads["default/w"].state == "pending"
    assert "parent quota" in out.workloads["default/w"].reason


def test_nodes_set_the_total_minus_default_usage():
    quotas = [EQ("team").min(cpu="0").max(cpu="100").build()]
    out = run_elastic(quotas, [WL("d", namespace="misc").req(cpu="3").build(),
                               WL("t", "team").req(cpu="50").build()],
                      [node("n1", cpu="4", memory="8Gi"), node("n2", cpu="4", memory="8Gi")])
    assert out.workloads["misc/d"].cluster_queue == k.DEFAULT_QUOTA
    assert out.quota_groups["team"].runtime == milli(cpu="5")


@pytest.mark.parametrize(("nodes", "runtime", "state"), [
    pytest.param([], "7", "pending", id="implicit-total-10-minus-3"),
    pytest.param([node("n1", cpu="14")], "8", "admitted", id="nodes-14-minus-3-leave-enough"),
])
def test_what_the_default_group_uses_is_not_shared(nodes, runtime, state):
    """updateClusterTotalResourceNoLock: the root shares the total minus the default group's used,
    also when the total is the top-level groups' max (no Nodes)."""
    quotas = [EQ("cluster").cluster(cpu="10").force().build(),
              EQ("team").parent("cluster").min(cpu="0").max(cpu="10").build()]
    out = run_elastic(quotas, [WL("d", namespace="misc").req(cpu="3").at(1).build(),
                               WL("t", "team").req(cpu="8").at(2).build()], nodes)
    assert out.workloads["misc/d"].cluster_queue == k.DEFAULT_QUOTA
    assert out.quota_groups["team"].runtime == milli(cpu=runtime)
    assert out.workloads["default/t"].state == state


def test_workload_requests_follow_the_pod_rule():
    obj = WL("w").count(3).build()
    spec = obj["spec"]["podSets"][0]["template"]["spec"]
    spec["containers"] = [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "0"}}},
                          {"name": "b", "resources": {"limits": {"cpu": "500m"}}}]
    spec["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": "2"}}}]
    spec["overhead"] = {"cpu": "100m"}
    assert workload_requests(obj) == {"cpu": 3 * 2100, "memory": 0}


# --- replay of the conformance scenarios -------------------------------------------------

def _scenario_files() -> list[Path]:
    files = sorted((SCENARIOS / "elastic").glob("*.yaml"))
    return files + sorted((SCENARIOS / "validation").glob("koord-*.yaml"))


def _replay(path: Path) -> list[str]:
    """Validate ElasticQuotas in order, run, and list every difference from ``expect``."""
    doc = yaml.safe_load(path.read_text())
    accepted: dict[str, dict] = {}
    rejected: set[str] = set()
    workloads: list[dict] = []
    nodes: list[dict] = []
    for obj in doc["objects"]:
        kind = obj.get("kind")
        if kind == "ElasticQuota":
            name = k.name_of(obj)
            errors = validate_elastic_quota(obj, old=accepted.get(name), quotas=accepted, workloads=workloads)
            if errors:
                rejected.add(f"ElasticQuota/{k.namespace_of(obj)}/{name}")
            else:
                accepted[name] = obj
        elif kind == "Workload":
            workloads.append(obj)
        elif kind == "Node":
            nodes.append(obj)
    out = run_elastic(list(accepted.values()), workloads, nodes)
    expect = doc["expect"]
    diffs = []
    for key, want in (expect.get("workloads") or {}).items():
        got = out.workloads.get(key)
        if got is None or got.state != want["state"]:
            diffs.append(f"{key}: {got and got.state} != {want['state']} ({got and got.reason})")
        elif "clusterQueue" in want and got.cluster_queue != want["clusterQueue"]:
            diffs.append(f"{key}: clusterQueue {got.cluster_queue} != {want['clusterQueue']}")
    preempted = {key for key, w in out.workloads.items() if w.preemptions > 0}
    if preempted != set(expect.get("preempted") or []):
        diffs.append(f"preempted {sorted(preempted)} != {sorted(expect.get('preempted') or [])}")
    for name, runtime in (expect.get("quotaGroups") or {}).items():
        status = out.quota_groups.get(name)
        for resource, quantity in runtime.items():
            got_value = status.runtime.get(resource) if status else None
            if got_value != parse(quantity):
                diffs.append(f"{name}.{resource}: runtime {got_value} != {parse(quantity)}")
    want_rejected = {key for key in expect.get("rejected") or [] if key.startswith("ElasticQuota/")}
    if rejected != want_rejected:
        diffs.append(f"rejected {sorted(rejected)} != {sorted(want_rejected)}")
    return diffs


@pytest.mark.parametrize("path", _scenario_files() or [None], ids=lambda p: p.stem if p else "missing")
def test_replay_scenario(path: Path | None):
    if path is None:
        pytest.skip(f"no scenarios under {SCENARIOS}")
    assert _replay(path) == []


# --- properties ---------------------------------------------------------------------------

@st.composite
def clusters(draw):
    """A cluster group, two to four teams, and workloads; some start admitted."""
    total = draw(st.integers(1, 40))
    quotas = [EQ("cluster").cluster(cpu=str(total)).build()]
    teams = [f"team-{i}" for i in range(draw(st.integers(2, 4)))]
    for team in teams:
        hi = draw(st.integers(0, 40))
        builder = EQ(team).parent("cluster").min(cpu=str(draw(st.integers(0, hi)))).max(cpu=str(hi)).force()
        if draw(st.booleans()):
            builder.no_lend()
        quotas.append(builder.build())
    workloads = []
    for i in range(draw(st.integers(0, 12))):
        wl = WL(f"w{i}", draw(st.sampled_from(teams))).req(cpu=str(draw(st.integers(1, 15))))
        wl.priority(draw(st.integers(0, 3))).at(i)
        if draw(st.booleans()):
            wl.non_preemptible()
        if draw(st.booleans()):
            wl.admitted()
        workloads.append(wl.build())
    return quotas, workloads


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_quiescence_respects_runtime_and_admits_what_fits(scenario):
    quotas, workloads = scenario
    out = run_elastic(quotas, workloads, [])
    used: dict[str, int] = {}
    for obj in workloads:
        key = f"default/{obj['metadata']['name']}"
        result = out.workloads[key]
        if result.state == "admitted":
            used[result.cluster_queue] = used.get(result.cluster_queue, 0) + workload_requests(obj)["cpu"]
        else:
            assert result.reason  # a pending workload says why it does not fit
    for group, amount in used.items():
        held = sum(workload_requests(o)["cpu"] for o in workloads
                   if o["metadata"]["labels"].get(k.LABEL_QUOTA_NAME) == group
                   and o["metadata"]["labels"].get(k.LABEL_PREEMPTIBLE) == "false"
                   and out.workloads[f"default/{o['metadata']['name']}"].state == "admitted")
        # Only workloads recycling may not evict (non-preemptible ones) can exceed the runtime.
        assert amount <= max(out.quota_groups[group].runtime["cpu"], held)
