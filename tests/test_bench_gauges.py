"""``bench/gauges_refresh.py`` runs and prints both kinds of refresh."""

from __future__ import annotations

import gc
import sys

import pytest

from tests.benches import load_bench


def test_the_refresh_bench_prints_a_median_for_each_kind(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_bench("gauges_refresh")
    monkeypatch.setattr(gc, "set_threshold", lambda *t: None)  # main tunes the collector, as the CLI does
    monkeypatch.setattr(sys, "argv", ["gauges_refresh.py", "--cluster-queues", "6", "--workloads", "12",
                                      "--repeat", "2"])
    bench.main()
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in capsys.readouterr().out.splitlines() if line.count("│") == 4}
    assert set(rows) == {"nothing changed", "one arrival and a round"}
    assert all(float(v) > 0 for v in rows.values())
