"""Hostile input, fuzzed: every kind kueued reads, built from its schema, then broken (issue 18).

Objects are drawn from the structural schemas ``kueued manifests`` installs (generated from the
msgspec Structs, :func:`kueued.kube.schema.structural`), or from a valid seed, and then mutated:
wrong types, missing and unknown fields, huge, negative and malformed quantities, long, binary and
non-UTF-8 names, duplicates (names come from small pools) and Cohort and ElasticQuota cycles
(parents come from the same pools).  A known-good ClusterQueue and Workload are mixed in.

The properties, through the function ``kueued simulate`` calls (``actors.simulation.simulate``):

- ``simulate`` never raises, and its report renders as JSON and as the table;
- every refusal is keyed by the object (``Kind/name``) and begins with the path of a field
  (``spec.resourceGroups[0]...: why``), never a bare message;
- a mutation that is certainly invalid (:func:`certain`) is refused, naming the field it broke;
- the good Workload is admitted whatever came before or after it.

Time and memory per example are measured, never asserted (a shared CI machine): the figures go
to ``build/reliability/fuzz_objects.json`` and into ``docs/reliability.md``.  Rerun with
``pytest tests/reliability/test_fuzz_objects.py``; ``KUEUED_FUZZ_EXAMPLES=2000`` explores more.
"""

from __future__ import annotations

import copy
import io
import json
import os
import re
import resource
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from actors.simulation import simulate
from kueued.kube import shapes
from kueued.kube.schema import structural
from kueued.manifests import read_manifests
from kueued.model import api
from kueued.model.validation.kinds import API_VERSIONS
from kueued.simulate import Report
from kueued.table import render
from tests.builders import cluster_queue, cohort, flavor, local_queue, namespace, quotas, workload
from tests.reliability.conftest import record
from tests.reliability.corpus.generate import write_big

EXAMPLES = int(os.environ.get("KUEUED_FUZZ_EXAMPLES", "1000"))

MODELS: dict[str, type] = {
    "ResourceFlavor": api.ResourceFlavor, "Cohort": api.Cohort, "ClusterQueue": api.ClusterQueue,
    "LocalQueue": api.LocalQueue, "Workload": api.Workload, "WorkloadPriorityClass": api.WorkloadPriorityClass,
    "Namespace": api.Namespace, "Configuration": api.Configuration, "ElasticQuota": shapes.ElasticQuota,
    "LimitRange": api.LimitRange,
}
SCHEMAS = {kind: structural(model) for kind, model in MODELS.items()}
NAMESPACED = {"LocalQueue", "Workload", "ElasticQuota", "LimitRange"}

# The good set: names no strategy below ever draws, so nothing fuzzed can touch it.
GOOD_NS, GOOD_CQ, GOOD_WL = "zz-good", "zz-good-cq", "zz-good/zz-good-wl"
GOOD = [namespace(GOOD_NS), flavor("zz-good-flavor"), cluster_queue(GOOD_CQ, quotas("zz-good-flavor", cpu="4")),
        local_queue("zz-good-lq", GOOD_NS, GOOD_CQ), workload("zz-good-wl", GOOD_NS, "zz-good-lq", cpu="1")]

# Small pools, so that duplicates, references that resolve and cycles are common.
NAMES = ["a", "b", "c", "f1", "q1", "lq1"]
# Non-UTF-8 reaches kueued as a file it cannot decode (the corpus) or as YAML's !!binary (bytes here);
# a lone surrogate never does (strict UTF-8 decoding, PyYAML and msgspec all refuse one).
HOSTILE_NAMES: list[Any] = ["", "UPPER_case", "x" * 254, "y" * 20_000, "café", "\x00nul", "a/b", "..",
                            b"\xff\xfebinary", 7, None, ["a"], {"name": "a"}, True, "\u202eevil", "[/oops]"]
NAMESPACES = ["fz", "fz2"]
RESOURCES = ["cpu", "memory", "nvidia.com/gpu", "pods", "Bad Resource!"]
GOOD_QUANTITIES: list[Any] = ["0", "1", "500m", "2", "4Gi", "100Mi", 3, 1, "1.5", "1e3"]
HOSTILE_QUANTITIES: list[Any] = [
    "1e100000000", "9" * 80, "-1", "-500m", -3, 2**70, -(2**70), "12xyz", "1.2.3", "", " ", "Infinity", "NaN",
    "0x10", "1e", ".", "+-1", "1Ki1", "١٢", 1.5, float("inf"), float("nan"), 1e308, True, None, [], {}, "1e-100000",
]
STRINGS = ["", "a", "Never", "Any", "LowerPriority", "LowerOrNewerEqualPriority", "TryNextFlavor", "MayStopSearch",
           "BestEffortFIFO", "StrictFIFO", "Hold", "HoldAndDrain", "None", "Equal", "Exists", "NoSchedule", "In",
           "NotIn", "True", "False", "Finished", "Evicted", "2026-01-01T00:00:00Z", "kueue.x-k8s.io", "default"]
WRONG_TYPES: list[Any] = [5, -1, "text", [], [1, "x"], {}, {"x": 1}, None, True, 1.5, b"\x80bytes", "[/oops]"]

# A string field whose name says what it refers to draws from the pool it refers to.
REFERENCES: dict[str, list[Any]] = {
    "parentName": NAMES, "cohortName": NAMES, "clusterQueue": NAMES, "queueName": NAMES, "name": NAMES + RESOURCES,
    "coveredResources[]": RESOURCES, "namespace": NAMESPACES,
}


# --- from the schema ----------------------------------------------------------------------------------

def pick(values: list[Any]) -> st.SearchStrategy[Any]:
    """One of ``values``, a fresh copy: a list or dict drawn twice must not become one shared object
    (a later mutation would then build a cycle no manifest can hold)."""
    return st.sampled_from(values).map(copy.deepcopy)


def _leaf(path: str) -> str:
    return path.rsplit(".", 1)[-1]


def from_schema(node: dict[str, Any], path: str = "", depth: int = 0) -> st.SearchStrategy[Any]:
    """Values of the JSON types ``node`` declares: valid by type, not necessarily by Kueue's rules."""
    if node.get("x-kubernetes-int-or-string"):  # a quantity
        return st.sampled_from(GOOD_QUANTITIES) | pick(HOSTILE_QUANTITIES)
    kind = node.get("type")
    if kind == "string":
        pool = REFERENCES.get(_leaf(path))
        return st.sampled_from(pool) if pool else st.sampled_from(STRINGS) | st.text(max_size=12)
    if kind == "integer":
        return st.sampled_from([0, 1, 2, 3, 10, -1, 2**31, 2**63, -(2**70)]) | st.integers(-5, 100)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        if depth > 6:
            return st.just([])
        return st.lists(from_schema(node.get("items", {}), f"{path}[]", depth + 1), max_size=3)
    if kind == "object" and "properties" in node:
        if depth > 6:
            return st.just({})
        props = {name: from_schema(sub, f"{path}.{name}".lstrip("."), depth + 1)
                 for name, sub in node["properties"].items() if name != "metadata"}
        required = {name: props.pop(name) for name in node.get("required", ()) if name in props}
        return st.fixed_dictionaries(required, optional=props)
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        keys = st.sampled_from(RESOURCES) if path.endswith(("requests", "limits", "min", "max", "overhead",
                                                           "allocatable", "capacity", "Resources")) else \
            st.sampled_from(["app", "team", "kueue.x-k8s.io/x", "quota.scheduling.koordinator.sh/parent", "k"])
        return st.dictionaries(keys, from_schema(node["additionalProperties"], f"{path}{{}}", depth + 1), max_size=3)
    return st.just({})  # preserved unknown fields: anything, so nothing of ours


@st.composite
def metadata(draw: st.DrawFn, kind: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": draw(st.sampled_from(NAMES))}
    if kind in NAMESPACED:
        meta["namespace"] = draw(st.sampled_from(NAMESPACES))
    if kind == "ElasticQuota" and draw(st.booleans()):  # Koordinator's tree: parents from the same pool
        meta["labels"] = {"quota.scheduling.koordinator.sh/parent": draw(st.sampled_from(NAMES)),
                          "quota.scheduling.koordinator.sh/is-parent": draw(st.sampled_from(["true", "false"]))}
    return meta


@st.composite
def schema_object(draw: st.DrawFn, kind: str) -> dict[str, Any]:
    body = draw(from_schema(SCHEMAS[kind]))
    body.pop("apiVersion", None)
    body.pop("kind", None)
    return {"apiVersion": API_VERSIONS[kind], "kind": kind, "metadata": draw(metadata(kind)), **body}


def _elastic_quota(name: str, ns: str, *, parent: str = "", minimum: Any = "1", maximum: Any = "2") -> dict[str, Any]:
    labels = {"quota.scheduling.koordinator.sh/parent": parent} if parent else {}
    return {"apiVersion": API_VERSIONS["ElasticQuota"], "kind": "ElasticQuota",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"min": {"cpu": minimum}, "max": {"cpu": maximum}}}


def seed(kind: str, name: str = "a", ns: str = "fz") -> dict[str, Any]:
    """A valid object of ``kind``: what the mutations break."""
    make: dict[str, Callable[[], dict[str, Any]]] = {
        "ResourceFlavor": lambda: flavor(name, nodeLabels={"zone": "a"}),
        "Cohort": lambda: cohort(name, quotas("f1", cpu="2"), parent="b"),
        "ClusterQueue": lambda: cluster_queue(name, quotas("f1", cpu="2", memory="1Gi"), cohort="c",
                                              preemption={"withinClusterQueue": "LowerPriority"}),
        "LocalQueue": lambda: local_queue(name, ns, "q1"),
        "Workload": lambda: workload(name, ns, "lq1", cpu="1", priority=3),
        "WorkloadPriorityClass": lambda: {"apiVersion": API_VERSIONS["WorkloadPriorityClass"],
                                          "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": 10},
        "Namespace": lambda: namespace(name, team="x"),
        "Configuration": lambda: {"apiVersion": API_VERSIONS["Configuration"], "kind": "Configuration",
                                  "fairSharing": {"enable": True,
                                                  "preemptionStrategies": ["LessThanOrEqualToFinalShare"]}},
        "ElasticQuota": lambda: _elastic_quota(name, ns, parent="b"),
        "LimitRange": lambda: {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name, "namespace": ns},
                               "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"cpu": "100m"},
                                                    "defaultRequest": {"cpu": "500m"}},
                                                   {"type": "Pod", "max": {"memory": "4Gi"}}]}},
    }
    return make[kind]()


@st.composite
def seeded(draw: st.DrawFn, kind: str) -> dict[str, Any]:
    return seed(kind, draw(st.sampled_from(NAMES)), draw(st.sampled_from(NAMESPACES)))


# --- mutations ------------------------------------------------------------------------------------------

def _paths(obj: Any) -> list[tuple[Any, ...]]:
    """Every path into ``obj`` (tuples of keys and indexes), walked without recursion."""
    out: list[tuple[Any, ...]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), obj)]
    while stack:
        path, value = stack.pop()
        out.append(path)
        if isinstance(value, dict):
            stack.extend((path + (k,), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((path + (i,), v) for i, v in enumerate(value))
    return out


def _at(obj: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        obj = obj[step]
    return obj


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    obj = draw(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(obj) if p]
        if not paths:
            break
        path = draw(st.sampled_from(sorted(paths, key=repr)))
        parent, last = _at(obj, path[:-1]), path[-1]
        if not isinstance(parent, dict | list):
            continue
        how = draw(st.sampled_from(["type", "delete", "unknown", "quantity", "name", "podsets"]))
        if how == "type":
            parent[last] = draw(pick(WRONG_TYPES))
        elif how == "delete" and isinstance(parent, dict):
            del parent[last]
        elif how == "unknown" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["sepc", "x-unknown", "Spec", "status", "apiversion"]))] = \
                draw(pick(WRONG_TYPES))
        elif how == "quantity":
            parent[last] = draw(pick(HOSTILE_QUANTITIES))
        elif how == "name" and isinstance(obj.get("metadata"), dict):
            obj["metadata"][draw(st.sampled_from(["name", "namespace"]))] = draw(pick(HOSTILE_NAMES))
        elif how == "podsets" and isinstance(obj.get("spec"), dict):
            count = draw(st.sampled_from([0, 19, 1000]))
            obj["spec"]["podSets"] = [{"name": f"p{i}", "count": 1} for i in range(count)]
    return obj


def hostile(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(seeded(kind), schema_object(kind), mutated(seeded(kind)), mutated(schema_object(kind)))


OBJECTS = st.sampled_from(sorted(MODELS)).flatmap(hostile)


# --- the checks -------------------------------------------------------------------------------------------

FIELD = re.compile(r"^([A-Za-z$][\w$-]*)(?:[.\[]|: )")


def assert_names_a_field(key: str, reason: str) -> None:
    """A refusal is keyed by its object and starts with the path of a field of that kind."""
    kind = key.split("/", 1)[0]
    match = FIELD.match(reason)
    assert match, f"{key}: the refusal names no field: {reason[:300]!r}"
    roots = {"kind", "apiVersion", "metadata"} | set(SCHEMAS.get(kind, {}).get("properties", {}))
    if kind not in API_VERSIONS:  # an unknown or missing kind: refused for that
        assert match.group(1) in ("kind", "apiVersion"), (key, reason[:300])
    else:
        unknown = reason.startswith(f'{match.group(1)}: unknown field "{match.group(1)}"')  # a top-level stray
        assert unknown or match.group(1) in roots | {"sepc", "x-unknown", "Spec", "status", "apiversion"}, (
            key, reason[:300])


def _bucket(kind: Any) -> str:
    return kind if isinstance(kind, str) and kind in API_VERSIONS else "(no or unknown kind)"


class Figures:
    """Per-example time and memory, refusals per kind: written out, never asserted."""

    def __init__(self) -> None:
        self.examples = 0
        self.objects: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self.max_seconds = 0.0
        self.max_objects = 0
        self.rss_start_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self.max_rss_growth_kb = 0

    def example(self, objects: list[Any], report: Report, seconds: float, rss_before: int) -> None:
        self.examples += 1
        self.objects.update(_bucket(o.get("kind")) for o in objects)
        self.refused.update("(unreadable file)" if "#" in k or k.endswith(".yaml") else _bucket(k.split("/", 1)[0])
                            for k in report.rejected)
        self.max_seconds = max(self.max_seconds, seconds)
        self.max_objects = max(self.max_objects, len(objects))
        growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
        self.max_rss_growth_kb = max(self.max_rss_growth_kb, growth)

    def write(self, name: str, **extra: Any) -> dict[str, Any]:
        body = {"examples": self.examples, "objects_by_kind": dict(sorted(self.objects.items())),
                "objects": sum(self.objects.values()), "refusals_by_kind": dict(sorted(self.refused.items())),
                "max_seconds_per_example": round(self.max_seconds, 4),
                "max_rss_growth_per_example_mb": round(self.max_rss_growth_kb / 1024, 1),
                "rss_growth_over_run_mb": round((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                                 - self.rss_start_kb) / 1024, 1), **extra}
        record(name, body)
        return body


def simulate_checked(manifests: list[Any], figures: Figures) -> Report:
    """``kueued simulate``'s in-process path, timed; the report must encode and render."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    report = simulate(manifests)
    msgspec.json.encode(report)
    render(report, Console(file=io.StringIO(), width=160))
    figures.example(manifests, report, time.perf_counter() - started, rss)
    return report


def test_fuzzed_objects_never_crash_simulate_and_leave_the_good_ones_scheduled() -> None:
    figures = Figures()

    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(objects=st.lists(OBJECTS, min_size=1, max_size=10), good_first=st.booleans())
    def check(objects: list[dict[str, Any]], good_first: bool) -> None:
        manifests = [*copy.deepcopy(GOOD), *objects] if good_first else [*objects, *copy.deepcopy(GOOD)]
        report = simulate_checked(manifests, figures)
        assert report.workloads[GOOD_WL].state == "admitted", report.workloads[GOOD_WL]
        for key, reason in report.rejected.items():
            assert_names_a_field(key, reason)

    check()
    body = figures.write("fuzz_objects", hypothesis_examples=EXAMPLES)
    assert body["examples"] >= EXAMPLES // 2  # it really explored


# --- mutations that are certainly invalid: refused, naming the field ---------------------------------------

def _certain_cases() -> list[Any]:
    cases = []
    for kind in sorted(MODELS):
        for name in (7, ["a"], b"\xffbin", "x" * 254, "UPPER_case", ""):
            if kind == "Configuration":
                continue
            cases.append(pytest.param(kind, ("metadata", "name"), name, "metadata.name",
                                      id=f"{kind}-name-{type(name).__name__}-{len(str(name))}"))
        if kind not in ("Namespace", "WorkloadPriorityClass", "Configuration"):
            for wrong in (5, "text", [1]):
                cases.append(pytest.param(kind, ("spec",), wrong, "spec", id=f"{kind}-spec-{type(wrong).__name__}"))
    quantity_paths = {
        "ClusterQueue": (("spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "nominalQuota"),
                         "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"),
        "Cohort": (("spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "nominalQuota"),
                   "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"),
        "Workload": (("spec", "podSets", 0, "template", "spec", "containers", 0, "resources", "requests", "cpu"),
                     "spec.podSets[0].template.spec.containers[0].resources.requests"),
        "ElasticQuota": (("spec", "max", "cpu"), "spec.max"),
    }
    for kind, (path, field) in quantity_paths.items():
        for bad in ("12xyz", "1.2.3", "", "0x10", "-1", [], True):
            cases.append(pytest.param(kind, path, bad, field, id=f"{kind}-quantity-{bad!r}"))
    cases.append(pytest.param("Workload", ("spec", "podSets"),
                              [{"name": f"p{i}", "count": 1} for i in range(10_000)], "spec.podSets",
                              id="Workload-10000-podsets"))
    cases.append(pytest.param("WorkloadPriorityClass", ("value",), 2**70, "value", id="WPC-huge-value"))
    cases.append(pytest.param("Configuration", ("fairSharing",), "yes", "fairSharing", id="Configuration-wrong-type"))
    # Found by the fuzzing: a type no rule checks reached the decoder, refused without a field path.
    cases.append(pytest.param("ClusterQueue", ("metadata", "namespace"), b"\xff", "metadata.namespace",
                              id="ClusterQueue-binary-namespace"))
    return cases


@pytest.mark.parametrize(("kind", "path", "value", "field"), _certain_cases())
def test_a_certainly_invalid_field_is_refused_by_name(kind: str, path: tuple[Any, ...], value: Any,
                                                      field: str) -> None:
    obj = seed(kind, "certain")
    _at(obj, path[:-1])[path[-1]] = value
    key = api.object_key(obj)
    report = simulate([*copy.deepcopy(GOOD), obj])
    assert key in report.rejected, (key, report.rejected)
    assert report.rejected[key].startswith(field), report.rejected[key][:300]
    assert_names_a_field(key, report.rejected[key])
    if isinstance(value, bytes):  # found by the fuzzing: YAML's !!binary was called "null"
        assert '"binary"' in report.rejected[key] or "bytes" in report.rejected[key], report.rejected[key][:300]
    assert report.workloads[GOOD_WL].state == "admitted"


# --- the hostile corpus, in process and through the command line -----------------------------------------

CORPUS = Path(__file__).parent / "corpus"


def corpus_files(tmp: Path) -> list[Path]:
    """The checked-in corpus and the big files generated into ``tmp`` (a 1,000-level chain, 10,000 podSets)."""
    return sorted(CORPUS.glob("*.yaml")) + write_big(tmp)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return corpus_files(tmp_path_factory.mktemp("corpus"))


@pytest.mark.timeout(240)
def test_the_hostile_corpus_never_crashes_simulate(tmp_path: Path, corpus: list[Path]) -> None:
    files = corpus
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump_all(GOOD))
    figures = Figures()
    per_file: dict[str, Any] = {}
    for path in files:
        started = time.perf_counter()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        manifests, problems = read_manifests([CORPUS / "base.yaml", path, good])
        report = simulate(manifests)
        report.rejected.update((p.where, p.reason) for p in problems)
        msgspec.json.encode(report)
        render(report, Console(file=io.StringIO(), width=160))
        seconds = time.perf_counter() - started
        figures.example(manifests, report, seconds, rss)
        assert report.workloads[GOOD_WL].state == "admitted", path.name
        for key, reason in report.rejected.items():
            if key.startswith(str(path)):  # the file or one of its documents could not be read at all
                assert key.split("#")[0] == str(path) and reason
            else:
                assert_names_a_field(key, reason)
        per_file[path.name] = {"objects": len(manifests) - len(GOOD) - 3, "refused": sorted(report.rejected),
                               "seconds": round(seconds, 3),
                               "rss_growth_mb": round((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss)
                                                      / 1024, 1)}
    figures.write("hostile_corpus_simulate", files=per_file)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", ["cohort-cycle.yaml", "bad-quantities.yaml", "non-utf8.yaml", "binary-names.yaml",
                                  "cohort-chain-1000.yaml", "podsets-10000.yaml"])
def test_the_command_line_reads_hostile_files_without_a_traceback(tmp_path: Path, corpus: list[Path],
                                                                  name: str) -> None:
    path = next(p for p in corpus if p.name == name)
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump_all(GOOD))
    done = subprocess.run([sys.executable, "-m", "kueued.cli", "--log-format", "json", "simulate", "-o", "json",
                           str(path), str(good)], capture_output=True, text=True, timeout=200)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    for line in done.stderr.splitlines():
        json.loads(line)  # only JSON lines under --log-format json
    report = json.loads(done.stdout)
    assert report["workloads"][GOOD_WL]["state"] == "admitted"
    for key, reason in report["rejected"].items():
        if not key.startswith(str(path)):
            assert_names_a_field(key, reason)
