"""A cycle's private copy of the snapshot: cloned once, refreshed after."""

from __future__ import annotations

from kueued.scheduling.snapshot import Snapshot
from tests.scheduling.test_preemption import CPU, admitted, cohort, cq, forest


def _state(snap: Snapshot) -> tuple[dict, dict]:
    return ({n.name: dict(n.usage) for n in snap.nodes()},
            {name: sorted(c.workloads) for name, c in snap.cluster_queues.items()})


def test_the_cycle_copy_is_reused_and_refreshed_from_the_live_state() -> None:
    live = forest(cohort("co", cpu="4"), cq("a", "co", cpu="2"), cq("b", "co", cpu="2"),
                  admitted("w1", "a", cpu="1"), admitted("w2", "b", cpu="3"))
    copy = live.cycle_copy()
    assert copy is not live and _state(copy) == _state(live)
    # a cycle charges its copy: reservations, admissions, a removed victim
    copy.cluster_queues["a"].add_usage({CPU: 2000})
    copy.remove_workload(copy.cluster_queues["b"].workloads["default/w2"])
    copy.derived(copy.cluster_queues["a"], "probe", lambda c: len(c.workloads))
    # meanwhile the live state moves on
    w1 = live.cluster_queues["a"].workloads["default/w1"]
    live.remove_workload(w1)
    again = live.cycle_copy()
    assert again is copy  # the same forest, not a new clone
    assert _state(again) == _state(live)
    assert again._derived == {}
    # the coordinator replaces every balance itself: no copying, only derived values go
    again.derived(again.cluster_queues["a"], "probe", lambda c: len(c.workloads))
    again.cluster_queues["a"].add_usage({CPU: 1000})
    kept = _state(again)
    assert live.cycle_copy(refresh=False) is copy
    assert _state(copy) == kept and copy._derived == {}


# --- the refresh copies only what moved, and still matches a full copy ------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kueued.model import api  # noqa: E402
from kueued.scheduling.workload import WorkloadInfo  # noqa: E402
from tests import builders as b  # noqa: E402

_QUEUES = ["a", "b", "c", "d"]


def _ordered(snap: Snapshot) -> tuple[dict, dict]:
    """Usage and admitted sets with their insertion order (a candidate order may break ties on it)."""
    return ({n.name: list(n.usage.items()) for n in snap.nodes()},
            {name: list(c.workloads) for name, c in snap.cluster_queues.items()})


def _tree() -> tuple[Snapshot, list[WorkloadInfo]]:
    live = forest(cohort("org", cpu="10"), b.cohort("t1", b.quotas("default", cpu=("2", None, "1")), parent="org"),
                  cohort("t2", "org", cpu="3"), cq("a", "t1", cpu="2"), cq("b", "t1", cpu=("1", "4", "1")),
                  cq("c", "t2", cpu="2"), cq("d", "org", cpu="1"))
    pool = []
    for i in range(8):
        obj = api.decode(admitted(f"w{i}", _QUEUES[i % 4], cpu=str(1 + i % 3)))
        assert isinstance(obj, api.Workload)
        pool.append(WorkloadInfo.of(obj, priority=0))
    return live, pool


_op = st.one_of(
    st.tuples(st.just("add"), st.booleans(), st.integers(0, 7)),
    st.tuples(st.just("remove"), st.booleans(), st.integers(0, 7)),
    st.tuples(st.just("charge"), st.booleans(), st.integers(0, 3), st.integers(-2, 3).map(lambda v: v * 500)),
    st.tuples(st.just("cycle")),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_op, max_size=40))
def test_a_refreshed_copy_equals_the_live_state_whatever_moved_on_either_side(ops: list[tuple]) -> None:
    live, pool = _tree()
    copy = live.cycle_copy()
    for op in ops:
        if op[0] == "cycle":
            copy = live.cycle_copy()
            assert _ordered(copy) == _ordered(live)
            continue
        side = live if op[1] else copy
        if op[0] == "add":
            wl = pool[op[2]]
            if wl.key not in side.cluster_queues[wl.cluster_queue].workloads:  # type: ignore[index]
                side.add_workload(wl)
        elif op[0] == "remove":
            side.remove_workload(pool[op[2]])
        else:
            side.cluster_queues[_QUEUES[op[2]]].add_usage({CPU: op[3]})
    assert _ordered(live.cycle_copy()) == _ordered(live)
