"""Remembered verdicts (``kueued.model.validation.memo``): a hit says what a fresh check says.

Each test validates an object with the Workload memos emptied (a fresh check), then again
once they hold verdicts (a hit), and compares.  The objects come in pairs that share what
the memos remember but differ elsewhere (name, namespace) or differ only where an encoding
could hide it (NaN and null, a date and its string), so a memo that handed out another
object's verdict, or matched on a lossy key, fails here.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kueued.errors import FieldError
from kueued.model.validation import validate_object
from kueued.model.validation import workload as workload_rules
from kueued.model.validation.fields import Errors
from kueued.model.validation.memo import VerdictMemo

Obj = dict[str, Any]


def pod_set(name: object = "main", count: object = 1, cpu: object = "1", **extra: Any) -> Obj:
    return {"name": name, "count": count, **extra, "template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}


def workload(name: object = "wl", *, namespace: object = "team", queue: object = "lq",
             pod_sets: list[Obj] | None = None, **spec: Any) -> Obj:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"queueName": queue, "podSets": pod_sets if pod_sets is not None else [pod_set()], **spec}}


def forget() -> None:
    workload_rules._POD_SETS.clear()
    workload_rules._TEMPLATES.clear()


@pytest.fixture(autouse=True)
def _empty_memos() -> Iterator[None]:
    forget()
    yield
    forget()


def fresh(obj: Obj) -> list[FieldError]:
    forget()
    return validate_object(copy.deepcopy(obj))


def paths(errors: list[FieldError]) -> set[str]:
    return {e.path for e in errors}


BAD_SPEC = {"pod_sets": [pod_set(count=-1, cpu="-2"), pod_set(minCount=3)], "priority": "high"}


@pytest.mark.parametrize(("first", "second"), [
    pytest.param(workload("Bad_One", **BAD_SPEC), workload("Bad_Two", **BAD_SPEC), id="same-spec-other-name"),
    pytest.param(workload("a", namespace="Team_A", **BAD_SPEC), workload("b", namespace="Team_B", **BAD_SPEC),
                 id="same-spec-other-namespace"),
    pytest.param(workload("a", pod_sets=[pod_set(count=-1)]), workload("b", pod_sets=[pod_set(count=-2)]),
                 id="other-count"),
    pytest.param(workload("a", pod_sets=[pod_set(cpu="-1")]), workload("b", pod_sets=[pod_set("b", cpu="-1")]),
                 id="template-at-the-same-path-in-other-specs"),
    pytest.param(workload("a", pod_sets=[pod_set(cpu="-1")]),
                 workload("b", pod_sets=[pod_set("x"), pod_set("y", cpu="-1")]), id="template-at-another-path"),
    pytest.param(workload("a", pod_sets=[pod_set(count=None)]), workload("b", pod_sets=[pod_set(count=float("nan"))]),
                 id="null-then-nan"),
    pytest.param(workload("a", pod_sets=[pod_set(cpu=None)]), workload("b", pod_sets=[pod_set(cpu=float("nan"))]),
                 id="null-then-nan-quantity"),
    pytest.param(workload("a", queue="2026-01-01"), workload("b", queue=datetime.date(2026, 1, 1)),
                 id="string-then-date"),
    pytest.param(workload("a", queue=["lq"]), workload("b", queue={"lq"}), id="list-then-set"),
    pytest.param(workload("a", pod_sets=[pod_set(count=1)]), workload("b", pod_sets=[pod_set(count=True)]),
                 id="one-then-true"),
    pytest.param(workload("a", pod_sets=[pod_set(count=2**70)]), workload("b", pod_sets=[pod_set(count=2**70)]),
                 id="beyond-msgpack"),
])
def test_a_remembered_verdict_is_the_fresh_verdict(first: Obj, second: Obj) -> None:
    expected_first, expected_second = fresh(first), fresh(second)
    forget()
    assert validate_object(copy.deepcopy(first)) == expected_first      # a miss, remembered
    assert validate_object(copy.deepcopy(second)) == expected_second    # a hit where content allows
    assert validate_object(copy.deepcopy(first)) == expected_first
    assert validate_object(copy.deepcopy(second)) == expected_second


def test_workloads_of_different_queues_share_their_pod_sets_verdict() -> None:
    """The memo is keyed on the pod sets, not the whole spec: the queue name differs per
    LocalQueue, and a memo of specs overflowed at a thousand queues."""
    forget()
    for i in range(3):
        assert validate_object(workload(f"w{i}", queue=f"lq-{i}")) == []
    assert len(workload_rules._POD_SETS) == 1
    errors = validate_object(workload("bad", queue="Not_A_Name"))
    assert [e.path for e in errors] == ["spec.queueName"]  # still checked for every object
    assert len(workload_rules._POD_SETS) == 1


def test_each_object_keeps_its_own_name_in_its_errors() -> None:
    one, two = workload("Bad_One", **BAD_SPEC), workload("Bad_Two", **BAD_SPEC)
    validate_object(one)
    assert len(workload_rules._POD_SETS) == 1
    errors = validate_object(two)
    assert len(workload_rules._POD_SETS) == 1  # the pod sets' verdict came from the memo
    names = [e.reason for e in errors if e.path == "metadata.name"]
    assert names and all('"Bad_Two"' in r and "Bad_One" not in r for r in names)
    assert paths(errors) >= {"spec.podSets[0].count", "spec.podSets[1]", "spec.priority",
                             "spec.podSets[0].template.spec.containers[0].resources.requests[cpu]"}


def test_a_status_is_checked_against_the_remembered_pod_sets() -> None:
    """The spec's verdict carries the pod-set counts the status checks need."""
    spec = {"pod_sets": [pod_set("a", count=2), pod_set("b", count=1)]}
    plain = workload("plain", **spec)
    reclaiming = workload("reclaiming", **spec)
    reclaiming["status"] = {"reclaimablePods": [{"name": "a", "count": 3}, {"name": "c", "count": 1}]}
    expected = fresh(reclaiming)
    forget()
    assert validate_object(plain) == []
    assert validate_object(reclaiming) == expected
    assert paths(expected) == {"status.reclaimablePods[a].count", "status.reclaimablePods[c].name"}


def test_a_memo_is_bounded_and_still_right_when_it_forgets() -> None:
    def check(errs: Errors, value: object, path: str) -> int:
        if value != 0:
            errs.add(path, f"not zero: {value}")
        return len(str(value))

    memo: VerdictMemo[int] = VerdictMemo(check, maxsize=3)
    for round_ in range(3):
        for n in range(10):
            errs = Errors()
            assert memo(errs, n, f"p{n % 2}") == len(str(n))
            assert errs.items == ([] if n == 0 else [FieldError(f"p{n % 2}", f"not zero: {n}")])
            assert len(memo) <= 3, round_


def test_content_msgpack_cannot_carry_is_checked_every_time() -> None:
    calls = []

    def check(errs: Errors, value: object, path: str) -> None:
        calls.append(value)

    memo: VerdictMemo[None] = VerdictMemo(check, maxsize=8)
    for value in (2**70, 2**70, float("nan"), float("nan"), {1, 2}, {1, 2}):
        memo(Errors(), value, "p")
    assert len(calls) == 6 and len(memo) == 0


_SCALARS = (st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([2**70, 0.5, 1.0, float("nan")])
            | st.sampled_from(["", "main", "Main", "1", "-1", "1Gi", "pods", "cpu", "x" * 70]))
_JUNK = st.recursive(
    _SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["name", "count", "minCount", "template", "spec", "containers", "resources",
                         "requests", "limits", "cpu", "pods", "topologyRequest", "required"]), inner, max_size=3),
    max_leaves=10)


@settings(max_examples=200, deadline=None)
@given(first=_JUNK, second=_JUNK, queue=_SCALARS)
def test_any_spec_gets_the_fresh_verdict_from_a_warm_memo(first: Any, second: Any, queue: Any) -> None:
    objs = [workload("one", pod_sets=[first, second], queue=queue), workload("two", pod_sets=[second]),
            workload("three", pod_sets=[second, first]), workload("Four", pod_sets=[first, second], queue=queue)]
    expected = [fresh(o) for o in objs]
    forget()
    for _ in range(2):
        assert [validate_object(copy.deepcopy(o)) for o in objs] == expected
