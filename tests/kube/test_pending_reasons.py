"""A waiting Workload's QuotaReserved condition, worded as Kueue words it: each of kueued's
sentences is made here by the code that makes it in a run (the actors' reasons), then translated."""

from __future__ import annotations

from typing import Any

import anyio

from actors.simulation import simulate_world
from kueued.engine.wiring import make_iterate, make_preemptor
from kueued.kube.pending_reasons import kueue_condition
from kueued.kube.port import InMemoryPort
from kueued.world import World
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload


def _sentences(*manifests: dict[str, Any]) -> dict[str, str]:
    """Why each pending workload waits, as the daemon's ReasonLog reads it off the coordinator."""
    world = World()
    for m in manifests:
        world.apply(m)

    async def main() -> dict[str, str]:
        coord = await simulate_world(world, InMemoryPort(), preemptor=make_preemptor, iterate=make_iterate(world))
        return {key: coord.unrouted.get(key) or coord.reasons.get(key, "")
                for key in world.workloads if key not in world.placed}
    return anyio.run(main)


def test_each_queue_problem_reads_as_kueue_s_inadmissible_condition() -> None:
    stopped_lq = local_queue("stopped", "ns", "cq")
    stopped_lq["spec"]["stopPolicy"] = "Hold"
    why = _sentences(
        namespace("ns"), namespace("other", team="b"), flavor("default"),
        cluster_queue("cq", quotas("default", cpu="1")),
        cluster_queue("held", quotas("default", cpu="1"), stopPolicy="Hold"),
        cluster_queue("picky", quotas("default", cpu="1"), namespaceSelector={"matchLabels": {"team": "a"}}),
        local_queue("lq", "ns", "cq"), local_queue("to-nowhere", "ns", "gone"), local_queue("to-held", "ns", "held"),
        local_queue("to-picky", "other", "picky"), stopped_lq,
        workload("fits", "ns", "lq", cpu="1"), workload("no-room", "ns", "lq", created=1, cpu="1"),
        workload("no-lq", "ns", "missing", cpu="1"), workload("no-cq", "ns", "to-nowhere", cpu="1"),
        workload("cq-held", "ns", "to-held", cpu="1"), workload("lq-held", "ns", "stopped", cpu="1"),
        workload("elsewhere", "other", "to-picky", cpu="1"))
    conditions = {key: kueue_condition(sentence) for key, sentence in why.items()}
    assert conditions["ns/no-lq"] == ("Inadmissible", "LocalQueue missing doesn't exist")
    assert conditions["ns/no-cq"] == ("Inadmissible", "ClusterQueue gone doesn't exist")
    assert conditions["ns/cq-held"] == ("Inadmissible", "ClusterQueue held is inactive")
    assert conditions["ns/lq-held"] == ("Inadmissible", "LocalQueue stopped is inactive")
    assert conditions["other/elsewhere"] == ("Pending", "Workload namespace doesn't match ClusterQueue selector")
    reason, message = conditions["ns/no-room"]
    assert reason == "Pending"
    assert message.startswith("couldn't assign flavors to pod set main: insufficient unused quota for cpu "
                              "in flavor default, 1 more needed")


def test_an_admission_gate_keeps_its_own_reason() -> None:
    assert kueue_condition("Admission is gated by: example.com/a") == ("AdmissionGated",
                                                                       "Admission is gated by: example.com/a")


def test_a_deactivated_workload_that_waits_is_marked_evicted_as_kueue_marks_it() -> None:
    off = workload("off", "ns", "lq", cpu="1")
    off["spec"]["active"] = False
    why = _sentences(namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="1")),
                     local_queue("lq", "ns", "cq"), off)
    assert kueue_condition(why["ns/off"]) == ("Deactivated", "The workload is deactivated")
