"""The version in force of a refused object, kept in an annotation (kueued.kube.in_force)."""

from __future__ import annotations

import copy

from hypothesis import given
from hypothesis import strategies as st

from kueued.kube import in_force
from tests.builders import cluster_queue, local_queue, quotas

_labels = st.dictionaries(st.sampled_from(["a", "b", "quota.scheduling.koordinator.sh/parent"]),
                          st.sampled_from(["1", "x"]), max_size=3)


@given(labels=_labels, annotations=_labels, cpu=st.sampled_from(["1", "2", "500m"]))
def test_the_earlier_version_comes_back_whole_around_the_newest_metadata_and_status(
        labels: dict, annotations: dict, cpu: str) -> None:
    held = cluster_queue("cq", quotas("default", cpu=cpu))
    held["metadata"].update(labels=labels, annotations=dict(annotations), generation=1)
    newest = copy.deepcopy(held)
    newest["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "-1"
    newest["metadata"].update(generation=2, labels={"other": "1"}, resourceVersion="7",
                              annotations={in_force.IN_FORCE_ANNOTATION: in_force.memo_of(held)})
    newest["status"] = {"conditions": [{"type": "Accepted", "status": "False"}]}
    earlier = in_force.earlier_of(newest)
    assert earlier is not None
    assert earlier["spec"] == held["spec"]
    assert earlier["metadata"]["labels"] == labels and earlier["metadata"]["annotations"] == annotations
    assert earlier["metadata"]["resourceVersion"] == "7" and earlier["status"] == newest["status"]
    assert in_force.memo_of(earlier) == in_force.memo_of(held)  # kept again as it was: no rewrite


def test_what_the_annotation_should_hold() -> None:
    held = local_queue("lq", "ns", "old")
    newest = local_queue("lq", "ns", "new")
    assert in_force.wanted(newest, held, refused=True) == in_force.memo_of(held)
    newest["metadata"]["annotations"] = {in_force.IN_FORCE_ANNOTATION: in_force.memo_of(held)}
    assert in_force.wanted(newest, held, refused=True) is in_force.KEEP  # there already
    assert in_force.wanted(newest, newest, refused=False) is None      # accepted: it goes
    assert in_force.wanted(local_queue("lq", "ns", "x"), None, refused=True) is in_force.KEEP  # nothing in force
    assert in_force.wanted(local_queue("lq", "ns", "x"), None, refused=False) is in_force.KEEP


def test_an_unreadable_annotation_is_no_earlier_version() -> None:
    for raw in ("", "not json", "[1]", '{"labels": {}}', "[" * 5000 + "]" * 5000):
        manifest = local_queue("lq", "ns", "cq")
        manifest["metadata"]["annotations"] = {in_force.IN_FORCE_ANNOTATION: raw}
        assert in_force.earlier_of(manifest) is None


def test_the_writer_drops_what_can_never_be_written_and_keeps_what_may_be_later() -> None:
    import anyio

    from kueued.kube.errors import ApiForbidden, ApiUnavailable
    from kueued.kube.in_force_writer import InForceWriter

    class Client:
        def __init__(self) -> None:
            self.fail: dict[str, Exception] = {}
            self.written: list[str] = []

        async def patch(self, kind: str, namespace: str | None, name: str, body: dict) -> dict:
            if name in self.fail:
                raise self.fail[name]
            self.written.append(name)
            return {}

    writer, client = InForceWriter(), Client()
    client.fail = {"denied": ApiForbidden(403, "Forbidden", "no"), "busy": ApiUnavailable(503, "Unavailable", "x")}
    for name in ("denied", "busy", "fine"):
        writer.note(local_queue(name, "ns", "cq"), "memo")
    assert anyio.run(writer.flush, client) == 1 and client.written == ["fine"]
    assert len(writer) == 1  # busy, tried again; denied dropped: it would be refused again
    client.fail = {}
    assert anyio.run(writer.flush, client) == 1 and client.written == ["fine", "busy"] and len(writer) == 0


def test_only_the_kinds_kueued_validates_get_the_annotation() -> None:
    from kueued.kube.status_publisher import TreeStatusPublisher
    publisher = TreeStatusPublisher(client=None)  # type: ignore[arg-type]
    held = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns", "labels": {"a": "1"}}}
    publisher.in_force({**held, "metadata": {"name": "ns", "labels": {"a": "2"}}}, held, refused=True)
    assert len(publisher.memory) == 0
    publisher.in_force(local_queue("lq", "ns", "new"), local_queue("lq", "ns", "old"), refused=True)
    assert len(publisher.memory) == 1
