"""The API server's audit log, narrowed to what a split-brain test needs as its witness.

Why: a test that asks "did the old leader write anything after the takeover?" cannot trust
the old leader's own log (a process that believes it leads is exactly the one that would
not say it wrote by mistake).  The API server's audit log records every request it served,
with the authenticated user, the verb, the object and when the response was complete, on
the server's clock, so it is the witness the test reads.

The policy records only writes (create, update, patch, delete) on Workloads and their
status, and on Leases in kueued's namespace, at ``Metadata`` level (no bodies), once per
request (the ``RequestReceived`` stage is omitted), and nothing else.  That keeps the log to
one short JSON line per Workload write, cheap enough that the integration suite's session
control plane always has it on.  The apiserver's default log mode, ``blocking``, writes
an event before it answers the request, so a line is in the file by the time the client
has its answer.

:func:`read_events` reads the JSON lines back as :class:`AuditEvent` records (a line still
being written, the last one, is skipped).
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WRITES = ("create", "update", "patch", "delete")

POLICY = """\
# Written by kueued.devcluster.audit: Workload and Lease writes, metadata only.
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    verbs: ["create", "update", "patch", "delete"]
    resources:
      - group: kueue.x-k8s.io
        resources: ["workloads", "workloads/status"]
  - level: Metadata
    verbs: ["create", "update", "patch", "delete"]
    namespaces: ["kueued-system"]
    resources:
      - group: coordination.k8s.io
        resources: ["leases"]
  - level: None
"""


@dataclass(frozen=True)
class AuditEvent:
    """One request the API server served, as the audit log records it."""

    user: str                 # user.username: a client certificate's CN
    user_agent: str
    verb: str                 # create, update (PUT), patch, delete
    resource: str             # objectRef.resource: workloads, leases
    subresource: str          # "status" or ""
    namespace: str
    name: str
    code: int                 # responseStatus.code (0 when absent)
    at: datetime.datetime     # stageTimestamp: when the response was complete, on the server's clock

    @property
    def ok(self) -> bool:
        return 200 <= self.code < 300

    @classmethod
    def of(cls, raw: dict[str, Any]) -> AuditEvent:
        ref = raw.get("objectRef") or {}
        return cls(user=str((raw.get("user") or {}).get("username", "")), user_agent=str(raw.get("userAgent", "")),
                   verb=str(raw.get("verb", "")), resource=str(ref.get("resource", "")),
                   subresource=str(ref.get("subresource", "")), namespace=str(ref.get("namespace", "")),
                   name=str(ref.get("name", "")), code=int((raw.get("responseStatus") or {}).get("code", 0)),
                   at=parse_time(str(raw["stageTimestamp"])))


def parse_time(stamp: str) -> datetime.datetime:
    """A MicroTime (``2026-01-01T00:00:00.123456Z``) as an aware datetime."""
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def write_policy(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(POLICY)
    return path


def apiserver_args(log: Path, policy: Path) -> list[str]:
    """The flags that turn the audit log on (rotated at the apiserver's default 100 MB: 150,000 writes)."""
    return [f"--audit-log-path={log}", f"--audit-policy-file={policy}"]


def read_events(log: Path) -> list[AuditEvent]:
    """Every complete event in ``log`` (none if it does not exist yet), in the order written."""
    try:
        text = log.read_text()
    except FileNotFoundError:
        return []
    events = []
    for line in text.splitlines():
        try:
            raw = json.loads(line)
        except json.JSONDecodeError:
            continue  # the last line, still being written
        if raw.get("stage") == "ResponseComplete" and raw.get("stageTimestamp"):
            events.append(AuditEvent.of(raw))
    return events
