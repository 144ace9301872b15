"""The hostile corpus (issue 18): ``python tests/reliability/corpus/generate.py`` rewrites the small
files checked in beside this script; the two big ones (a 1,000-level Cohort chain and a Workload of
10,000 podSets) are only ever written into a test's temporary directory (:func:`write_big`).

Every object is named ``hostile-*`` (or sits in namespace ``hostile``) and labelled ``kueued.io/corpus:
hostile``, so a test can delete them all from a shared cluster, and none can touch another test's objects.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).parent
KUEUE = "kueue.x-k8s.io/v1beta2"
EQ = "scheduling.sigs.k8s.io/v1alpha1"
NS = "hostile"


def _cq(name: str, nominal: Any = "1", *, cohort: str = "", flavor: str = "hostile-flavor",
        **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": [{
        "coveredResources": ["cpu"], "flavors": [{"name": flavor, "resources": [{"name": "cpu",
                                                                               "nominalQuota": nominal}]}]}]}
    if cohort:
        spec["cohortName"] = cohort
    spec.update(extra)
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def _cohort(name: str, parent: str = "") -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name},
            "spec": {"parentName": parent} if parent else {}}


def _wl(name: str, cpu: Any = "1", *, queue: str = "hostile-lq", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"queueName": queue, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}]}
    body.update(spec)
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": NS}, "spec": body}


def _eq(name: str, *, parent: str = "", minimum: Any = "1", maximum: Any = "2") -> dict[str, Any]:
    labels = {"quota.scheduling.koordinator.sh/parent": parent,
              "quota.scheduling.koordinator.sh/is-parent": "true"} if parent else \
        {"quota.scheduling.koordinator.sh/is-parent": "true"}
    return {"apiVersion": EQ, "kind": "ElasticQuota", "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"min": {"cpu": minimum}, "max": {"cpu": maximum}}}


BASE = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "hostile-flavor"}},
        {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "hostile-lq", "namespace": NS},
         "spec": {"clusterQueue": "hostile-cq"}}]
"""What the hostile objects refer to: itself valid."""


_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


LABEL = {"kueued.io/corpus": "hostile"}
"""On every object whose labels can hold it: a test deletes the corpus with one request per kind."""


def _yaml(*docs: Any) -> bytes:
    for doc in docs:
        meta = doc.get("metadata") if isinstance(doc, dict) else None
        if isinstance(meta, dict) and isinstance(meta.setdefault("labels", {}), dict):
            meta["labels"].update(LABEL)
    return yaml.dump_all(docs, Dumper=_DUMPER, sort_keys=False, width=200).encode()


SMALL: dict[str, bytes] = {
    "base.yaml": _yaml(*BASE),
    "cohort-cycle.yaml": _yaml(_cohort("hostile-a", "hostile-b"), _cohort("hostile-b", "hostile-c"),
                               _cohort("hostile-c", "hostile-a"), _cohort("hostile-self", "hostile-self"),
                               _cq("hostile-cq-cycle", cohort="hostile-a"),
                               _wl("hostile-in-cycle", queue="hostile-lq")),
    "huge-quantities.yaml": _yaml(_cq("hostile-huge", "1e100000000"), _cq("hostile-huge-digits", "9" * 60),
                                  _wl("hostile-huge-request", "1e18"),
                                  _wl("hostile-huge-priority", priority=2**40),
                                  {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass",
                                   "metadata": {"name": "hostile-huge-value"}, "value": 2**40},
                                  _eq("hostile-eq-huge", minimum="1e100000000", maximum="1e100000000")),
    "negative-quantities.yaml": _yaml(_cq("hostile-negative", "-1"), _wl("hostile-negative-request", "-2"),
                                      _eq("hostile-eq-negative", minimum="-1", maximum="-1")),
    "bad-quantities.yaml": _yaml(*(_cq(f"hostile-badq-{i}", q) for i, q in enumerate(
        ["12xyz", "1.2.3", "0x10", "1e", "+-1", "Infinity", "1Ki1", ""])),
        _wl("hostile-badq-request", "two cpus")),
    "unknown-fields.yaml": _yaml({**_cq("hostile-unknown-top"), "sepc": {"cohortName": "x"}},
                                 _cq("hostile-unknown-spec", unknownField=1),
                                 {**_wl("hostile-unknown-wl"), "extra": True}),
    "wrong-types.yaml": _yaml({**_cq("hostile-spec-int"), "spec": 5},
                              _cq("hostile-groups-string", resourceGroups="cpu"),
                              {**_wl("hostile-count-string"),
                               "spec": {"queueName": "hostile-lq", "podSets": [{"name": "main", "count": "three"}]}},
                              {"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": "hostile-labels-list", "labels": ["a", "b"]}},
                              {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass",
                               "metadata": {"name": "hostile-value-string"}, "value": "ten"}),
    "missing-fields.yaml": _yaml({"apiVersion": KUEUE, "metadata": {"name": "hostile-no-kind"}},
                                 {"kind": "ClusterQueue", "metadata": {"name": "hostile-no-apiversion"}},
                                 {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {},
                                  "spec": {"namespaceSelector": {}}},
                                 _cq("hostile-resource-no-name", resourceGroups=[{"coveredResources": ["cpu"],
                                     "flavors": [{"name": "hostile-flavor", "resources": [{"nominalQuota": "1"}]}]}]),
                                 {"apiVersion": KUEUE, "kind": "ClusterQueu", "metadata": {"name": "hostile-typo"}}),
    "long-names.yaml": _yaml(_cq("hostile-" + "l" * 300), _wl("hostile-" + "w" * 5000),
                             {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "hostile-" + "n" * 64}}),
    "binary-names.yaml": (b"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\n"
                          b"metadata: {name: !!binary /+7/}\n---\n"
                          b"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\n"
                          b"metadata: {name: \"hostile-\\udcff\"}\nspec: {namespaceSelector: {}}\n---\n"
                          b"apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: 42}\n"),
    "non-utf8.yaml": ("apiVersion: v1\nkind: Namespace\nmetadata: {name: hostile-café}\n").encode("latin-1"),
    "duplicates.yaml": _yaml(_cq("hostile-dup", "1"), _cq("hostile-dup", "3"),
                             {**BASE[2], "spec": {"clusterQueue": "hostile-other"}},  # clusterQueue is immutable
                             _wl("hostile-dup-wl", "1"), _wl("hostile-dup-wl", "2")),
    "elastic-cycle.yaml": _yaml(_eq("hostile-eq-a", parent="hostile-eq-b"), _eq("hostile-eq-b", parent="hostile-eq-a")),
    "alias-bomb.yaml": b"a: &a [x, x, x, x, x, x, x, x, x, x]\n" + b"".join(  # 10**7 values once expanded
        f"{n}: &{n} [{', '.join(['*' + prev] * 10)}]\n".encode() for prev, n in zip("abcde", "bcdef", strict=True))
        + b"g: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\nkind: Namespace\n",
}


def big() -> dict[str, bytes]:
    chain = [_cohort("hostile-chain-0")] + [_cohort(f"hostile-chain-{i}", f"hostile-chain-{i - 1}")
                                            for i in range(1, 1000)]
    chain.append(_cq("hostile-cq-deep", cohort="hostile-chain-999"))
    podsets = _wl("hostile-podsets")
    podsets["spec"]["podSets"] = [{"name": f"p{i}", "count": 1, "template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "1m"}}}]}}} for i in range(10_000)]
    return {"cohort-chain-1000.yaml": _yaml(*chain), "podsets-10000.yaml": _yaml(podsets)}


def write_big(directory: Path) -> list[Path]:
    paths = []
    for name, data in big().items():
        (directory / name).write_bytes(data)
        paths.append(directory / name)
    return paths


def main(directory: Path = HERE) -> None:
    for name, data in SMALL.items():
        (directory / name).write_bytes(data)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
