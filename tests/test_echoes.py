"""What the scheduler reads of an object (``kueued.echoes``): the echo of kueued's own status writes
changes nothing, and a change kueued did not write (a Node's allocatable) always counts."""

from __future__ import annotations

import copy
from typing import Any

from kueued.echoes import same_to_the_scheduler


def _node(cpu: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "resourceVersion": "1", **meta},
            "status": {"allocatable": {"cpu": cpu}, "conditions": [{"type": "Ready", "status": "True",
                                                                     "lastHeartbeatTime": "t0"}]}}


def test_a_node_s_allocatable_changes_through_status_and_counts() -> None:
    assert not same_to_the_scheduler(_node("100"), _node("200", resourceVersion="2"))


def test_a_node_heartbeat_is_no_change_to_the_scheduler() -> None:
    beat = _node("100", resourceVersion="2")
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "t1"
    assert same_to_the_scheduler(_node("100"), beat)


def test_a_queue_s_status_is_kueued_s_own_write() -> None:
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
          "spec": {"namespaceSelector": {}}, "status": {"pendingWorkloads": 1}}
    echo = copy.deepcopy(cq)
    echo["status"]["pendingWorkloads"] = 2
    assert same_to_the_scheduler(cq, echo)
