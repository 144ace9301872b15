"""The Lease as leader election reads and writes it, and the checks its timings must pass.

:class:`~kueued.kube.lease.LeaderElector` runs the election; this module holds what it
works on and what it needs: the port to the API (:class:`LeaseClient`, and
:class:`KubeLeases` over the real client), the Lease's spec as a value
(:class:`LeaderRecord`), the statistics it reports (:class:`ElectionStats`), and
:func:`check_timings`, which turns a lease duration, renew deadline and retry period into
how long commits stay allowed after a renewal, or refuses timings that cannot work.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

import msgspec

from kueued.kube.client import Kind, KubeClient

__all__ = ["LeaderRecord", "ElectionStats", "LeaseClient", "KubeLeases", "default_identity", "check_timings",
           "JITTER", "with_spec", "utcnow"]

JITTER = 1.2
"""client-go's JitterFactor: a follower waits ``retry_period × (1 + up to 1.2)`` between tries."""

class LeaseClient(Protocol):
    """What the elector needs of the API: read, create and replace (PUT) one object."""

    async def get(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any]: ...

    async def create(self, kind: Kind, body: dict[str, Any]) -> dict[str, Any]: ...

    async def replace(self, kind: Kind, namespace: str | None, name: str, body: dict[str, Any]) -> dict[str, Any]: ...


class KubeLeases:
    """:class:`~kueued.kube.client.KubeClient`'s get and create, and the PUT (RBAC verb ``update``)."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube

    async def get(self, kind: Kind, namespace: str | None, name: str) -> dict[str, Any]:
        return await self.kube.get(kind, namespace, name)

    async def create(self, kind: Kind, body: dict[str, Any]) -> dict[str, Any]:
        return await self.kube.create(kind, body)

    async def replace(self, kind: Kind, namespace: str | None, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """PUT the whole object; its ``metadata.resourceVersion`` makes it conditional (409)."""
        # KubeClient has no public PUT of an object (only of /status); its one request path is used.
        return await self.kube._call("PUT", kind.path(namespace, name), body=body)


def default_identity() -> str:
    """This host's name and a random suffix (controller-runtime's ``hostname_uuid``): unique per process."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:12]}"


def utcnow() -> datetime:
    return datetime.now(UTC)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class LeaderRecord(msgspec.Struct, frozen=True):
    """A Lease's spec as the election reads it (client-go's LeaderElectionRecord)."""

    holder: str = ""       # holderIdentity; "" is nobody
    duration: int = 0      # leaseDurationSeconds: how long the holder asks the others to wait
    acquired: str = ""     # acquireTime (MicroTime): for people, never compared
    renewed: str = ""      # renewTime: likewise
    transitions: int = 0   # leaseTransitions

    @classmethod
    def of(cls, lease: Mapping[str, Any]) -> LeaderRecord:
        spec = lease.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        return cls(holder=str(spec.get("holderIdentity") or ""), duration=_int(spec.get("leaseDurationSeconds")),
                   acquired=str(spec.get("acquireTime") or ""), renewed=str(spec.get("renewTime") or ""),
                   transitions=_int(spec.get("leaseTransitions")))

    def spec(self) -> dict[str, Any]:
        return {"holderIdentity": self.holder, "leaseDurationSeconds": self.duration,
                "acquireTime": self.acquired, "renewTime": self.renewed, "leaseTransitions": self.transitions}


class ElectionStats(msgspec.Struct, frozen=True):
    """What the elector reports for metrics and ``kueued status``."""

    lease: str             # namespace/name
    identity: str
    leader: bool           # holds the lease (as far as this process knows)
    fenced: bool           # commits allowed now (fence())
    holder: str            # the holder last observed, "" for none
    transitions: int       # the Lease's leaseTransitions as last observed
    acquired: int          # times this process took the lease
    lost: int              # times it stepped down
    renew_failures: int


def with_spec(lease: dict[str, Any], record: LeaderRecord) -> dict[str, Any]:
    """``lease`` (its resourceVersion: a conditional PUT) with ``record`` written over its spec;
    spec fields the election does not know (``strategy``, ``preferredHolder``) stay."""
    spec = lease.get("spec")
    return {**lease, "spec": {**(spec if isinstance(spec, dict) else {}), **record.spec()}}


def check_timings(*, lease_duration: float, renew_deadline: float, retry_period: float, safety_margin: float = 2.0,
                  max_drift: float = 0.01, jitter: float = JITTER) -> float:
    """How long commits stay allowed after a renewal; ValueError, with the reason, for timings that
    cannot work (client-go's checks, and one of ours: the fence must outlast a retry period)."""
    if min(lease_duration, renew_deadline, retry_period) <= 0:
        raise ValueError("lease duration, renew deadline and retry period must be positive")
    if lease_duration <= renew_deadline:
        raise ValueError(f"the lease duration ({lease_duration:g}s) must be longer than the renew deadline "
                         f"({renew_deadline:g}s)")
    if renew_deadline <= JITTER * retry_period:
        raise ValueError(f"the renew deadline ({renew_deadline:g}s) must be longer than {JITTER:g} × the retry "
                         f"period ({retry_period:g}s)")
    if safety_margin < 0 or not 0 <= max_drift < 1 or jitter < 0:
        raise ValueError("the safety margin, the clock drift (below 1) and the jitter cannot be negative")
    valid_for = min(renew_deadline, lease_duration * (1.0 - max_drift) - safety_margin)
    if valid_for <= retry_period:
        raise ValueError(f"commits would be allowed for {valid_for:g}s after a renewal, not longer than the retry "
                         f"period ({retry_period:g}s): lengthen the lease or shorten the safety margin")
    return valid_for
