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
