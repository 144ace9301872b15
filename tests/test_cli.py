"""The command line: simulate's two outputs, validate, and clear errors on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from kueued.cli import main
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "examples" / "organisation.yaml"


def _write(tmp_path: Path, docs: list[dict]) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_simulate_json_reports_decisions_and_rejections(tmp_path, capsys) -> None:
    bad = cluster_queue("bad", quotas("default", cpu=("1", None, "5")), cohort="c")
    path = _write(tmp_path, [namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="1")),
                             bad, local_queue("lq", "ns", "cq"), workload("a", "ns", "lq", created=1, cpu="1"),
                             workload("b", "ns", "lq", created=2, cpu="1"),
                             workload("c", "ns", "missing", created=3, cpu="1")])
    assert main(["simulate", str(path), "--output", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["workloads"]["ns/a"] == {"state": "admitted", "clusterQueue": "cq",
                                        "flavors": {"main": {"cpu": "default"}}}
    assert out["workloads"]["ns/b"]["state"] == "pending"
    assert "cpu" in out["workloads"]["ns/b"]["reason"]
    assert "LocalQueue missing" in out["workloads"]["ns/c"]["reason"]
    assert set(out["rejected"]) == {"ClusterQueue/bad"}
    assert "lendingLimit" in out["rejected"]["ClusterQueue/bad"]


def test_simulate_table_on_the_example(capsys) -> None:
    assert main(["simulate", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "Workloads" in out and "admitted" in out and "typo-queue" in out


def test_the_table_footer_counts_finished_workloads_apart(tmp_path, capsys) -> None:
    timed = workload("done", "ns", "lq", cpu="1")
    timed["metadata"]["annotations"] = {"kueued.io/runtime": "1"}
    path = _write(tmp_path, [namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="1")),
                             local_queue("lq", "ns", "cq"), timed, workload("big", "ns", "lq", cpu="2")])
    assert main(["simulate", str(path), "--output", "table"]) == 0
    assert "0 admitted, 1 pending, 1 finished," in capsys.readouterr().out


def test_validate_exit_code_names_the_field(tmp_path, capsys) -> None:
    path = _write(tmp_path, [cluster_queue("cq", quotas("default", cpu="-1"))])
    assert main(["validate", str(path)]) == 1
    assert "nominalQuota" in capsys.readouterr().out


def test_unreadable_file_is_a_clear_error(tmp_path, capsys) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("kind: [unclosed")
    assert main(["simulate", str(path)]) == 1  # ran, but some input could not be read
    assert "broken.yaml#0: not valid YAML" in capsys.readouterr().err


def test_the_cli_sets_the_collector_thresholds_for_a_large_heap(tmp_path, capsys) -> None:
    import gc

    from kueued.gc_tuning import THRESHOLDS
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        main(["validate", str(_write(tmp_path, [namespace("ns")]))])
        assert gc.get_threshold() == THRESHOLDS
    finally:
        gc.set_threshold(*before)
