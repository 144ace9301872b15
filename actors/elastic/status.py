"""What the elastic tree writes back: request and runtime annotations, validity conditions.

Koordinator's scheduler keeps each ElasticQuota's annotations in step with its group
(``controller.go`` syncElasticQuotaStatus, every second): the group's request and runtime
as JSON resource lists (``quota.scheduling.koordinator.sh/request``, ``.../runtime``),
patched only when a value changed, zeros removed before comparing (quotav1.RemoveZeros),
so an idle lender never gets ``{"cpu":"0"}`` written over nothing.  kueued does the same
after every settled batch, through the API port.  What was last written is remembered
here; until something is written, the object's own annotations stand for it (an object
that already says the right thing is not patched again after a restart).  A refused write may
still have landed (an answer lost on the way back), so until a write to that object succeeds
what it says is unknown: its next publish writes both annotations, and its next condition is
written whatever it is.

Validation: Koordinator's webhook refuses a bad ElasticQuota at apply time.  kueued reads
objects from a source that cannot refuse them, so it leaves the earlier version in force
(``World``) and says why on the object: condition ``Accepted=False`` (reason
``ValidationFailed``, the field errors as message).  A later version that is accepted
flips it back to ``True``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
import structlog

from kueued.kube.port import ApiPort, Condition
from kueued.model import koordinator as k
from kueued.model.quantity import QuantityError, format_milli

__all__ = ["StatusWriter", "ACCEPTED"]

ACCEPTED = "Accepted"

log = structlog.get_logger("kueued.elastic")

Amounts = Mapping[str, int]


def _nonzero(amounts: Amounts) -> dict[str, int]:
    return {r: v for r, v in amounts.items() if v}


def _encode(amounts: Amounts) -> str:
    """A ResourceList as json.Marshal writes it: keys sorted, canonical quantities."""
    return msgspec.json.encode({r: format_milli(v, resource=r) for r, v in amounts.items()}, order="sorted").decode()


def _status_used(quota: Mapping[str, Any]) -> dict[str, int]:
    status = quota.get("status")
    try:
        return k.resource_list(status.get("used") if isinstance(status, Mapping) else None)
    except (ValueError, TypeError, QuantityError):
        return {}


class StatusWriter:
    def __init__(self, port: ApiPort) -> None:
        self.port = port
        self._last: dict[str, dict[str, dict[str, int]]] = {}  # quota -> annotation -> amounts written
        self._conditions: dict[str, Condition] = {}  # quota -> the Accepted condition last written
        self._doubt: set[str] = set()  # quotas whose last annotation write failed (module notes)
        self._used_last: dict[str, dict[str, int]] = {}  # quota -> status.used last written

    async def publish(self, quota: Mapping[str, Any], *, request: Amounts, runtime: Amounts,
                      used: Amounts | None = None) -> bool:
        """Write the group's request and runtime where they moved, and its ``status.used``; whether
        anything was written."""
        name, namespace = k.name_of(quota), k.namespace_of(quota)
        wrote_used = used is not None and await self._used(quota, used)
        last = self._last.setdefault(name, {})
        moved: dict[str, dict[str, int]] = {}
        for key, amounts in ((k.ANNOTATION_REQUEST, request), (k.ANNOTATION_RUNTIME, runtime)):
            before = last[key] if key in last else k.annotated_amounts(quota, key)
            if name in self._doubt or _nonzero(before) != _nonzero(amounts):
                moved[key] = dict(amounts)
        if not moved:
            return wrote_used
        if not await self.port.annotate_quota(name, namespace=namespace,
                                              annotations={key: _encode(v) for key, v in moved.items()}):
            self._doubt.add(name)  # refused: tried again after the next batch
            return wrote_used
        self._doubt.discard(name)
        last.update(moved)
        log.info("elastic_quota_status", quota=name, **{key.rsplit("/", 1)[1]: _encode(v) for key, v in moved.items()})
        return True

    async def _used(self, quota: Mapping[str, Any], used: Amounts) -> bool:
        """``status.used`` as Koordinator writes it (a ResourceList, zeros left out), where it moved."""
        name, namespace = k.name_of(quota), k.namespace_of(quota)
        wanted = _nonzero(used)
        before = self._used_last[name] if name in self._used_last else _nonzero(_status_used(quota))
        if wanted == before:
            return False
        body: dict[str, str | None] = {r: None for r in before if r not in wanted}  # a merge: gone is null
        body.update((r, format_milli(v, resource=r)) for r, v in sorted(wanted.items()))
        if not await self.port.quota_used(name, namespace=namespace, used=body):
            self._used_last.pop(name, None)  # in doubt: compared with the object again next time
            return False
        self._used_last[name] = wanted
        return True

    async def validated(self, quota: Mapping[str, Any], reason: str | None) -> bool:
        """An ElasticQuota was refused (``reason``) or accepted: set its Accepted condition if that changed."""
        name, namespace = k.name_of(quota), k.namespace_of(quota)
        if not name:
            return False  # nothing to write a condition to
        before = self._conditions.get(name)
        if before is None and (on := k.accepted_condition(quota)) is not None:  # written before a restart
            before = Condition(ACCEPTED, str(on.get("status")), str(on.get("reason") or ""),
                               str(on.get("message") or ""))
        if reason is not None:
            condition = Condition(ACCEPTED, "False", "ValidationFailed", reason)
        elif before is not None and before.status != "True":  # refused, or in doubt
            condition = Condition(ACCEPTED, "True", "Valid", "the current version passed validation")
        else:
            return False  # accepted and never refused: nothing to correct
        if condition == before:
            return False
        if not await self.port.set_quota_condition(name, namespace=namespace, condition=condition):
            self._conditions[name] = _IN_DOUBT
            return False
        self._conditions[name] = condition
        return True

    def forget(self, name: str) -> None:
        """The ElasticQuota is gone: a new one of that name starts from its own annotations."""
        self._last.pop(name, None)
        self._conditions.pop(name, None)
        self._doubt.discard(name)


_IN_DOUBT = Condition(ACCEPTED, "Unknown", "WriteFailed", "the last write was refused: it may have landed")
