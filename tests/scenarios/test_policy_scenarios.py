"""kueued's own conformance-style scenarios (``tests/scenarios/**.yaml``).

``policies/`` holds the KEP-1093 admission-policy scenarios; ``peers/`` pins rules of Kueue's
and Koordinator's own code that the shared scenarios do not show; ``ported/`` holds 836 more
cases ported from Kueue's and Koordinator's test suites (scheduler, preemption, fair sharing,
hierarchy, queues, controllers, flavor assignment, elastic quota, validation), each naming its upstream case in
``source:`` and, where a unit test's setup had to be approximated, saying how in ``notes:``.
Writing them found the defects fixed in the same stop (partial admission, LimitRanges, stop
policies, deactivation, Configuration validation...); the few ports left out are listed in
``ported/README.md`` with why.

Same format as ``../shared/conformance/FORMAT.md`` and judged by the conformance
runner's own ``compare``; each runs on the actor engine.
The policy scenarios also run with every ``kueued.io/admission-policy`` annotation
stripped: where a scenario says the policy changes the order, Kueue's plain order must
give a different outcome, so the scenario cannot pass by accident.
"""

from __future__ import annotations

import copy
import importlib.machinery
import importlib.util
from pathlib import Path

import msgspec
import pytest
import yaml

from actors.simulation import simulate
from kueued.manifests import load_manifests
from kueued.scheduling.policies import ADMISSION_POLICY

HERE = Path(__file__).resolve().parent
RUNNER = HERE.parents[1].parent / "shared" / "conformance" / "run"
SCENARIOS = sorted(HERE.rglob("*.yaml"))

# Scenarios whose outcome is Kueue's anyway (the annotation says fifo, or is refused).
SAME_WITHOUT_POLICIES = {"kueued/policies/fifo-default-matches-kueue", "kueued/policies/invalid-annotation-rejected"}


def _compare():
    loader = importlib.machinery.SourceFileLoader("conformance_run", str(RUNNER))
    spec = importlib.util.spec_from_loader("conformance_run", loader)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    loader.exec_module(module)
    return module.compare


def _params():
    for path in SCENARIOS:
        yield pytest.param(path, id=yaml.safe_load(path.read_text())["name"])


def _outcome(manifests: list[dict]) -> dict:
    report = simulate(manifests)
    return msgspec.json.decode(msgspec.json.encode(report))


@pytest.mark.skipif(not RUNNER.is_file(), reason="../shared/conformance is not beside this checkout")
@pytest.mark.parametrize("path", list(_params()))
def test_scenario(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    problems = _compare()(doc["expect"], _outcome(load_manifests([path])))
    assert not problems, "\n".join(problems)


@pytest.mark.skipif(not RUNNER.is_file(), reason="../shared/conformance is not beside this checkout")
@pytest.mark.parametrize("path", [p for p in _params() if p.values[0].parent.name == "policies"
                                  and yaml.safe_load(p.values[0].read_text())["name"] not in SAME_WITHOUT_POLICIES])
def test_policy_changes_the_outcome(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    manifests = copy.deepcopy(load_manifests([path]))
    for m in manifests:
        (m.get("metadata") or {}).get("annotations", {}).pop(ADMISSION_POLICY, None)
    assert _compare()(doc["expect"], _outcome(manifests)), "Kueue's order gives the same outcome"


def test_there_are_policy_scenarios() -> None:
    assert len(SCENARIOS) >= 6
