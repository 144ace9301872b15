"""Every scenario of ../shared/conformance, run in-process through ``simulate``.

Outcomes are compared with the conformance runner's own ``compare`` (loaded from
``../shared/conformance/run``), so this test and ``make conformance`` cannot drift.
Scenarios that need a feature owned by another open issue are listed in
``known_failures.txt`` with that issue's number: they are strict xfails, so one that
starts passing fails the suite until it is taken off the list; an unlisted scenario
that fails is a plain failure.  The list only shrinks.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

import msgspec
import pytest
import yaml

from actors.simulation import simulate
from kueued.manifests import load_manifests

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[1].parent / "shared" / "conformance"
SCENARIOS = sorted((SHARED / "scenarios").rglob("*.yaml")) if SHARED.is_dir() else []


def _known_failures() -> dict[str, str]:
    out = {}
    for line in (HERE / "known_failures.txt").read_text().splitlines():
        line = line.split("#", 1)
        name = line[0].strip()
        if name:
            out[name] = line[1].strip() if len(line) > 1 else ""
    return out


def _runner():
    loader = importlib.machinery.SourceFileLoader("conformance_run", str(SHARED / "run"))
    spec = importlib.util.spec_from_loader("conformance_run", loader)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    loader.exec_module(module)
    return module


KNOWN = _known_failures()


def _params():
    for path in SCENARIOS:
        name = yaml.safe_load(path.read_text()).get("name", path.stem)
        marks = []
        if name in KNOWN:
            marks.append(pytest.mark.xfail(strict=True, reason=f"owned by issue {KNOWN[name]}"))
        yield pytest.param(path, id=name, marks=marks)


@pytest.mark.skipif(not SCENARIOS, reason="../shared/conformance is not beside this checkout")
@pytest.mark.parametrize("path", list(_params()))
def test_scenario(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    report = simulate(load_manifests([path]))
    got = msgspec.json.decode(msgspec.json.encode(report))
    problems = _runner().compare(doc.get("expect") or {}, got)
    assert not problems, "\n".join(problems)


def test_known_failures_name_real_scenarios() -> None:
    names = {yaml.safe_load(p.read_text()).get("name", p.stem) for p in SCENARIOS}
    if not names:
        pytest.skip("no scenarios")
    assert set(KNOWN) <= names, sorted(set(KNOWN) - names)
