"""What the elastic tree writes back through the port: annotations when they move, conditions."""

from __future__ import annotations

import json

import anyio

from actors.elastic.status import StatusWriter
from kueued.kube.port import Condition, InMemoryPort
from kueued.model import koordinator as k
from tests.elastic.builders import EQ, milli

REQUEST, RUNTIME = k.ANNOTATION_REQUEST, k.ANNOTATION_RUNTIME


class RefusingPort(InMemoryPort):
    """Refuses the first status write (a conflict), accepts the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = 0

    async def annotate_quota(self, quota: str, *, namespace: str, annotations: dict[str, str]) -> bool:
        if not self.refused:
            self.refused += 1
            return False
        return await super().annotate_quota(quota, namespace=namespace, annotations=annotations)


def test_annotations_are_written_only_when_a_value_moves() -> None:
    port = InMemoryPort()
    writer = StatusWriter(port)
    quota = EQ("team-a").min(cpu="1").max(cpu="4", memory="8Gi").build()

    async def main() -> list[bool]:
        return [
            await writer.publish(quota, request=milli(cpu="3"), runtime=milli(cpu="2", memory="0")),
            await writer.publish(quota, request=milli(cpu="3"), runtime=milli(cpu="2", memory="0")),  # same
            await writer.publish(quota, request=milli(cpu="3", memory="0"), runtime=milli(cpu="2")),  # zeros only
            await writer.publish(quota, request=milli(cpu="3"), runtime=milli(cpu="2500m", memory="1Gi")),
        ]

    assert anyio.run(main) == [True, False, False, True]
    assert [s.annotations for s in port.quota_status] == [
        {REQUEST: '{"cpu":"3"}', RUNTIME: '{"cpu":"2","memory":"0"}'},
        {RUNTIME: '{"cpu":"2500m","memory":"1Gi"}'},  # the request did not move: not written again
    ]
    assert {s.namespace for s in port.quota_status} == {"kube-system"}


def test_what_the_object_already_says_is_not_written_again() -> None:
    port = InMemoryPort()
    quota = EQ("team-a").max(cpu="4").annotate(REQUEST, json.dumps({"cpu": "3"})) \
        .annotate(RUNTIME, json.dumps({"cpu": "2"})).build()
    assert not anyio.run(lambda: StatusWriter(port).publish(quota, request=milli(cpu="3"), runtime=milli(cpu="2")))
    assert not port.quota_status


def test_a_refused_write_is_tried_again() -> None:
    port = RefusingPort()
    writer = StatusWriter(port)
    quota = EQ("team-a").max(cpu="4").build()

    async def main() -> list[bool]:
        return [await writer.publish(quota, request=milli(cpu="1"), runtime=milli(cpu="1")) for _ in range(2)]

    assert anyio.run(main) == [False, True]
    assert port.annotations("team-a") == {REQUEST: '{"cpu":"1"}', RUNTIME: '{"cpu":"1"}'}


def test_the_accepted_condition_follows_validation() -> None:
    port = InMemoryPort()
    writer = StatusWriter(port)
    quota = EQ("team-a").max(cpu="4").build()

    async def main() -> list[bool]:
        return [
            await writer.validated(quota, None),  # accepted, never refused: nothing to say
            await writer.validated(quota, "spec.min.cpu: min 5 > max 4"),
            await writer.validated(quota, "spec.min.cpu: min 5 > max 4"),  # the same refusal again
            await writer.validated(quota, None),
        ]

    assert anyio.run(main) == [False, True, False, True]
    assert [s.condition for s in port.quota_status] == [
        Condition("Accepted", "False", "ValidationFailed", "spec.min.cpu: min 5 > max 4"),
        Condition("Accepted", "True", "Valid", "the current version passed validation"),
    ]


class LosingPort(InMemoryPort):
    """Applies the next write it is told to lose, then answers as a refusal (the connection reset
    after the API server applied it)."""

    def __init__(self) -> None:
        super().__init__()
        self.lose = 0

    async def annotate_quota(self, quota: str, *, namespace: str, annotations: dict[str, str]) -> bool:
        await super().annotate_quota(quota, namespace=namespace, annotations=annotations)
        if self.lose:
            self.lose -= 1
            return False
        return True

    async def set_quota_condition(self, quota: str, *, namespace: str, condition: Condition) -> bool:
        await super().set_quota_condition(quota, namespace=namespace, condition=condition)
        if self.lose:
            self.lose -= 1
            return False
        return True


def test_a_write_whose_answer_was_lost_is_written_again_even_when_back_to_the_last_value() -> None:
    """1 cpu written; 2 written but the answer lost (applied); back to 1: written, not taken as there."""
    port = LosingPort()
    writer = StatusWriter(port)
    quota = EQ("team-a").max(cpu="4").build()

    async def main() -> list[bool]:
        first = await writer.publish(quota, request=milli(cpu="1"), runtime=milli(cpu="1"))
        port.lose = 1
        lost = await writer.publish(quota, request=milli(cpu="2"), runtime=milli(cpu="2"))
        return [first, lost, await writer.publish(quota, request=milli(cpu="1"), runtime=milli(cpu="1"))]

    assert anyio.run(main) == [True, False, True]
    assert port.annotations("team-a") == {REQUEST: '{"cpu":"1"}', RUNTIME: '{"cpu":"1"}'}


def test_a_condition_whose_answer_was_lost_is_written_again() -> None:
    """Refused, then accepted (written, answer lost), then refused again: the refusal is written."""
    port = LosingPort()
    writer = StatusWriter(port)
    quota = EQ("team-a").max(cpu="4").build()
    refusal = "spec.min.cpu: min 5 > max 4"

    async def main() -> list[bool]:
        first = await writer.validated(quota, refusal)
        port.lose = 1
        lost = await writer.validated(quota, None)
        return [first, lost, await writer.validated(quota, refusal), await writer.validated(quota, None)]

    assert anyio.run(main) == [True, False, True, True]


def test_a_refusal_written_before_a_restart_is_lifted_once_the_quota_is_in_force() -> None:
    """A fresh writer (a restarted daemon) knows its conditions only from the object: an
    ``Accepted=False`` left there is turned True once the quota passes, never left stale."""
    port = InMemoryPort()
    quota = EQ("team-a").max(cpu="4").build()
    quota["status"] = {"conditions": [{"type": "Accepted", "status": "False", "reason": "ValidationFailed",
                                       "message": "already bound"}]}
    assert anyio.run(lambda: StatusWriter(port).validated(quota, None))
    (written,) = port.quota_status
    assert written.condition == Condition("Accepted", "True", "Valid", "the current version passed validation")
    fresh = EQ("team-b").max(cpu="4").build()  # never refused: nothing to write
    assert not anyio.run(lambda: StatusWriter(port).validated(fresh, None))
