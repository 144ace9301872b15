"""The daemon with a status publisher: queue status after every pass, refusals said on the object."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import anyio
import yaml

from actors.daemon import run_daemon
from kueued.kube.events import EventRecorder
from kueued.kube.port import InMemoryPort
from kueued.kube.status_publisher import TreeStatusPublisher
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload
from tests.kube.test_tree_status import BAD_REASON, FakeClient


def test_the_daemon_publishes_queue_status_and_says_why_an_object_was_refused(tmp_path: Path) -> None:
    bad = cluster_queue("bad", quotas("default", cpu=("4", "2")))
    (tmp_path / "all.yaml").write_text(yaml.safe_dump_all([
        namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="2")), bad,
        local_queue("lq", "ns", "cq"), workload("a", "ns", "lq", created=1, cpu="2"),
        workload("b", "ns", "lq", created=2, cpu="2")]))
    done = anyio.Event()

    class Watched(FakeClient):
        """Says when the queue's status and the refusal's Event have both been written."""

        async def patch_status(self, *args: Any) -> dict[str, Any]:
            try:
                return await super().patch_status(*args)
            finally:
                self._check()

        async def create_event(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            try:
                return await super().create_event(*args, **kwargs)
            finally:
                self._check()

        def _check(self) -> None:
            if self.status.get("ClusterQueue/cq", {}).get("admittedWorkloads") == 1 and {
                    "ValidationFailed", "Pending"} <= {e[2] for e in self.events if e[1] == "Warning"}:
                done.set()

    client = Watched()
    status = TreeStatusPublisher(client, recorder=EventRecorder(client), min_interval=0.0)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(run_daemon, tmp_path, InMemoryPort(), interval=0.01, handle_signals=False,
                                  status=status))
            with anyio.fail_after(20):
                await done.wait()
            tg.cancel_scope.cancel()

    anyio.run(main)
    cq = client.status["ClusterQueue/cq"]
    assert (cq["pendingWorkloads"], cq["admittedWorkloads"]) == (1, 1)
    assert cq["flavorsUsage"] == [{"name": "default", "resources": [{"name": "cpu", "total": "2", "borrowed": "0"}]}]
    assert client.status["LocalQueue/ns/lq"]["admittedWorkloads"] == 1
    (accepted,) = client.status["ClusterQueue/bad"]["conditions"]
    assert (accepted["status"], accepted["reason"], accepted["message"]) == ("False", "ValidationFailed", BAD_REASON)
    # one warning, however often the refused version comes back (a wired coordinator adds admission Events)
    assert [e for e in client.events if e[2] == "ValidationFailed"] == [("bad", "Warning", "ValidationFailed",
                                                                          BAD_REASON)]
    # and Kueue's Pending warning on the workload that waits for quota
    assert any(e[1:3] == ("Warning", "Pending") and e[3].startswith("couldn't assign flavors") for e in client.events)
