"""KubePort under the faults the proxy injects, on a fake client: the three bugs test_api_faults found.

- An admission whose answer was lost (a reset after the API server wrote it) was taken for
  refused, and its quota given to another Workload: the API then showed both admitted.
  Now a failure that may follow the write is settled by reading the Workload back.
- A pending condition whose write failed was dropped: nobody says an unchanged reason
  twice, so the Workload stayed without one.  Now it stays due.
- A restart wrote every pending Workload's condition again, unchanged (1,300 writes per
  restart in test_kill9).  Now one the Workload already shows is not written.
"""

from __future__ import annotations

from typing import Any

from kueued.kube.commits import KubePort
from kueued.kube.errors import ApiConflict, ApiUnavailable


class FlakyClient:
    """Fails the next ``fail`` status writes with ``error``; ``applied`` says whether a failed one
    was written all the same (an answer lost on the way back)."""

    def __init__(self, manifest: dict[str, Any]) -> None:
        self.stored = manifest
        self.fail: list[Exception] = []
        self.applied = False
        self.writes = 0
        self.reads = 0

    async def patch_status(self, kind: str, namespace: str | None, name: str, body: dict[str, Any]) -> dict:
        self.writes += 1
        if self.fail:
            if self.applied:
                self._apply(body)
            raise self.fail.pop(0)
        return self._apply(body)

    def _apply(self, body: dict[str, Any]) -> dict[str, Any]:
        status = dict(self.stored.get("status") or {})
        status.update(body["status"])
        self.stored = {**self.stored, "status": {k: v for k, v in status.items() if v is not None},
                       "metadata": {**self.stored["metadata"], "resourceVersion": str(self.writes + 100)}}
        return self.stored

    async def patch(self, kind: str, namespace: str | None, name: str, body: dict[str, Any]) -> dict:
        return body

    async def get(self, kind: str, namespace: str | None, name: str) -> dict:
        self.reads += 1
        return self.stored


def _manifest(**status: Any) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns", "resourceVersion": "7", "generation": 1}, "status": status}


def _port(client: FlakyClient, manifest: dict[str, Any]) -> KubePort:
    return KubePort(client, manifest_of=lambda key: manifest, requests_of=lambda key: [("main", 1, {"cpu": 1000})],
                    pending_interval=0.0, clock=lambda: 0.0)


def _reset() -> ApiUnavailable:
    return ApiUnavailable(None, "ConnectionError", "[Errno 104] Connection reset by peer")


async def test_an_admission_written_but_unanswered_stands() -> None:
    manifest = _manifest()
    client = FlakyClient(manifest)
    client.fail, client.applied = [_reset()], True
    port = _port(client, manifest)
    assert await port.admit("ns/w", cluster_queue="cq", flavors={"main": {"cpu": "f"}}, usage={("f", "cpu"): 1000})
    assert client.reads == 1 and port.refused == 0
    assert manifest["status"]["admission"]["clusterQueue"] == "cq"  # the next write builds on it


async def test_an_admission_unanswered_and_not_written_is_refused() -> None:
    manifest = _manifest()
    client = FlakyClient(manifest)
    client.fail = [_reset()]
    port = _port(client, manifest)
    assert not await port.admit("ns/w", cluster_queue="cq", flavors={"main": {"cpu": "f"}}, usage={})
    assert client.reads == 1 and port.refused == 1


async def test_a_conflict_is_refused_without_reading_back() -> None:
    manifest = _manifest()
    client = FlakyClient(manifest)
    client.fail = [ApiConflict(409, "Conflict", "the object has been modified")]
    port = _port(client, manifest)
    assert not await port.admit("ns/w", cluster_queue="cq", flavors={}, usage={})
    assert client.reads == 0


async def test_a_failed_pending_condition_stays_due() -> None:
    manifest = _manifest()
    client = FlakyClient(manifest)
    client.fail = [ApiUnavailable(503, "ServiceUnavailable")]
    port = _port(client, manifest)
    port.pending("ns/w", "insufficient quota")
    assert await port.flush_pending() == 0
    assert await port.flush_pending() == 1  # nobody said it again, and it was written all the same


async def test_a_pending_condition_already_shown_is_not_written_again() -> None:
    shown = [{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "insufficient quota",
              "lastTransitionTime": "t0"}]
    manifest = _manifest(conditions=shown)
    client = FlakyClient(manifest)
    port = _port(client, manifest)
    port.pending("ns/w", "insufficient quota")
    assert await port.flush_pending() == 0 and client.writes == 0
    port.pending("ns/w", "something else now")
    assert await port.flush_pending() == 1
