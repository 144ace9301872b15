"""The scenarios (../shared/conformance's, and tests/scenarios' ports of Kueue's suites) run by the
daemon itself: ``run_daemon`` following a directory that holds the scenario's objects, until its
first settled pass.

``simulate`` builds its engine after every object is loaded; the daemon starts its coordinator
on an empty World and meets the objects (a Configuration among them) as they come, with its own
wiring: its clock, its pending-reason log, its writes.  A wire crossed there (the admission order
once stayed the classical one when fair sharing came in a Configuration, so six fair-sharing
scenarios decided otherwise on a cluster) passes every ``simulate`` test and fails here.

The ElasticQuota scenarios are left to ``simulate``: forced recycling is off in the daemon unless
configured (Koordinator's default), and on in ``simulate``, so they expect what only one of them does;
so are the scenarios that update an object (``_comparable``).
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import yaml

from kueued.simulate import report_from
from tests.actors.test_daemon import _first_settle
from tests.conformance.test_scenarios import SHARED, _runner

OURS = Path(__file__).resolve().parents[1] / "scenarios"  # ported from Kueue's suites, and kueued's own


def _comparable(path: Path) -> bool:
    """A scenario the daemon can play as ``simulate`` does: no ElasticQuota (see above), and no object
    given twice (an update: a directory holds one version of each object, the first file's)."""
    doc = yaml.safe_load(path.read_text())
    objects = doc.get("objects") if isinstance(doc, dict) else None
    if not isinstance(objects, list):
        return False
    keys = [(o.get("kind"), (o.get("metadata") or {}).get("namespace"), (o.get("metadata") or {}).get("name"))
            for o in objects if isinstance(o, dict)]
    return len(keys) == len(set(keys)) and all(kind not in ("ElasticQuota", "Node") for kind, _, _ in keys)


KUEUE = sorted(p for root in ((SHARED / "scenarios") if SHARED.is_dir() else None, OURS) if root is not None
               for p in root.rglob("*.yaml") if _comparable(p))


def _daemon_report(directory: Path) -> dict:
    got: dict = {}

    def look(coord) -> None:
        report = report_from(coord.world, reasons=coord.reasons, unrouted=coord.unrouted, events=list(coord.events),
                             cycles=coord.rounds, evicted=coord.evicted)
        got.update(msgspec.json.decode(msgspec.json.encode(report)))

    _first_settle(directory, look)
    return got


@pytest.mark.skipif(not KUEUE, reason="../shared/conformance is not beside this checkout")
@pytest.mark.parametrize("path", KUEUE, ids=[f"{p.parent.name}/{p.stem}" for p in KUEUE])  # ~500 in seconds
def test_the_daemon_decides_as_the_scenario_expects(path: Path, tmp_path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    (tmp_path / "objects.yaml").write_text(yaml.safe_dump_all(doc["objects"]))
    problems = _runner().compare(doc.get("expect") or {}, _daemon_report(tmp_path))
    assert not problems, "\n".join(problems)
