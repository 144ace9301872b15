"""The command line under bad input: clear errors naming what is wrong, no tracebacks, and under
``--log-format json`` nothing but JSON lines on stderr."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kueued.cli import main
from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload

GOOD = [namespace("ns"), flavor("default"), cluster_queue("cq", quotas("default", cpu="4")),
        local_queue("lq", "ns", "cq"), workload("a", "ns", "lq", cpu="1")]


def _good(tmp_path: Path) -> Path:
    path = tmp_path / "good.yaml"
    path.write_text(yaml.safe_dump_all(GOOD))
    return path


def _kueued(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kueued.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]  # raises on any line that is not JSON


def test_user_strings_are_shown_not_parsed_as_markup(tmp_path: Path, capsys) -> None:
    bad = workload("b", "ns", "[/oops]", cpu="1")
    bad["metadata"]["labels"] = {"note": "[bold]x"}
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all([*GOOD, bad]))
    assert main(["simulate", str(path)]) == 0
    out = capsys.readouterr().out
    assert '"[/oops]"' in out and "[a-z0-9]" in out.replace("\n", "")  # the queue name and the pattern's text


def test_unknown_and_missing_kinds_are_refused_by_name(tmp_path: Path, capsys) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all([*GOOD, {"apiVersion": "v1", "kind": "ClusterQueu", "metadata": {"name": "x"}},
                                        {"apiVersion": "v1", "metadata": {"name": "y"}},
                                        {**cluster_queue("old", quotas("default", cpu="1")),
                                         "apiVersion": "kueue.x-k8s.io/v1beta1"}]))
    assert main(["simulate", "-o", "json", str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "did you mean ClusterQueue?" in report["rejected"]["ClusterQueu/x"]
    assert report["rejected"]["?/y"].startswith("kind: Required value")
    assert report["rejected"]["ClusterQueue/old"].startswith('apiVersion: Unsupported value: "kueue.x-k8s.io/v1beta1"')
    assert report["workloads"]["ns/a"]["state"] == "admitted"


def test_simulate_and_validate_read_around_unreadable_files(tmp_path: Path, capsys) -> None:
    good = _good(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"kind: Namespace\nmetadata: {name: caf\xe9}\n")
    assert main(["simulate", "-o", "json", str(good), str(bad)]) == 1
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["workloads"]["ns/a"]["state"] == "admitted"
    assert "not UTF-8" in report["rejected"][str(bad)] and f"{bad}: not UTF-8" in captured.err
    assert main(["validate", str(good), str(bad)]) == 1
    assert "5 accepted, 0 rejected, 1 unreadable" in capsys.readouterr().out


@pytest.mark.parametrize("args, why", [
    pytest.param(["run", "--interval", "-1"], "must be between 0.01 and 3600 seconds", id="negative-interval"),
    pytest.param(["run", "--interval", "0"], "must be between 0.01 and 3600 seconds", id="zero-interval"),
    pytest.param(["run", "--interval", "nan"], "must be between", id="nan-interval"),
    pytest.param(["run", "--metrics-port", "70000"], "must be between 0 and 65535", id="port-range"),
    pytest.param(["--log-level", "loud", "simulate", "x.yaml"], "invalid choice", id="log-level"),
])
def test_bad_command_line_values_are_usage_errors_in_json_too(args: list[str], why: str) -> None:
    done = _kueued("--log-format", "json", *args)
    assert done.returncode == 2
    (event,) = _json_lines(done.stderr)
    assert event["event"] == "command_failed" and why in event["error"]


def test_the_log_flags_work_after_the_subcommand_too(tmp_path: Path) -> None:
    good = tmp_path / "flavor.yaml"
    good.write_text("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: default}\n")
    done = _kueued("validate", str(good), "--log-level", "debug", "--log-format", "console")
    assert done.returncode == 0 and "1 accepted" in done.stdout, done.stderr
    done = _kueued("run", "--interval", "0", "--log-level", "info", "--log-format", "json")
    assert done.returncode == 2
    (event,) = _json_lines(done.stderr)  # the usage error in JSON: --log-format was taken
    assert event["event"] == "command_failed" and "must be between" in event["error"]
    done = _kueued("run", "--log-level", "loud")
    assert done.returncode == 2 and "invalid choice: 'LOUD'" in done.stderr


def test_a_busy_metrics_port_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _kueued("run", "--manifests", str(tmp_path), "--metrics-port", str(port))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"--metrics-port {port}: cannot serve metrics there" in done.stderr


def test_plot_without_matplotlib_fails_before_the_run(tmp_path: Path, capsys, monkeypatch) -> None:
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    ran = []
    monkeypatch.setattr("kueued.simulate.simulate_timed", lambda *a, **k: ran.append(1))
    assert main(["simulate", str(_good(tmp_path)), "--plot", str(tmp_path / "plots")]) == 2
    assert "--plot needs matplotlib" in capsys.readouterr().err and ran == []


@pytest.mark.parametrize("config, why", [
    pytest.param({"cohorts": [{"className": "c", "count": 1, "queuesSets": [{
        "className": "q", "count": 1, "nominalQuota": 1, "workloadsSets": [
            {"count": 2, "creationIntervalMs": -5, "workloads": [{"className": "w", "runtimeMs": 1}]}]}]}]},
        "Expected `int` >= 0", id="negative-interval"),
    pytest.param({"cohorts": [{"className": "c", "count": 10**6, "queuesSets": [{
        "className": "q", "count": 10**6, "nominalQuota": 1}]}]}, "creates more than 100,000 ClusterQueues",
        id="huge-count"),
    pytest.param({"cohorts": [{"className": "c", "count": 10**7}]}, "Expected `int` <= 2000000", id="count-bound"),
    pytest.param({"cohorts": [{"className": "c", "count": 100, "queuesSets": [{
        "className": "q", "count": 100, "nominalQuota": 1, "workloadsSets": [
            {"count": 1000, "creationIntervalMs": 1, "workloads": [{"className": "w", "runtimeMs": 1}]}]}]}]},
        "creates more than 2,000,000 workloads", id="huge-product"),
    pytest.param({"cohorts": [{"className": "Bad_Name", "count": 1}]}, "at `$.cohorts[0].className`", id="class-name"),
])
def test_generator_fields_are_checked(tmp_path: Path, capsys, config: dict, why: str) -> None:
    path = tmp_path / "gen.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["simulate", "--generator", str(path)]) == 2
    err = capsys.readouterr().err
    assert why in err and str(path) in err and "Traceback" not in err


def test_an_uncaught_exception_is_one_json_event() -> None:
    code = ("from kueued.logging import configure; configure(json=True); "
            "raise RuntimeError('boom [x]')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    (event,) = _json_lines(done.stderr)
    assert event["event"] == "uncaught_exception" and "RuntimeError: boom [x]" in event["error"]
    assert "Traceback" in event["traceback"]


@pytest.mark.timeout(120)
def test_the_daemon_keeps_serving_beside_a_hostile_directory_in_json(tmp_path: Path) -> None:
    _good(tmp_path)
    (tmp_path / "latin.yaml").write_bytes(b"kind: Namespace\nmetadata: {name: caf\xe9}\n")
    (tmp_path / "list.yaml").write_text("kind: List\nitems: 5\n")
    (tmp_path / "huge.yaml").write_text(yaml.safe_dump(cluster_queue("h", quotas("default", cpu="1e100000000"))))
    (tmp_path / "dangling.yaml").symlink_to(tmp_path / "gone.yaml")
    proc = subprocess.Popen([sys.executable, "-m", "kueued.cli", "--log-format", "json", "--log-level", "INFO",
                             "run", "--manifests", str(tmp_path), "--interval", "0.05"],
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    events = []
    for line in proc.stderr:
        events.append(json.loads(line))
        if events[-1]["event"] == "settled":
            break
    proc.terminate()
    _, remaining = proc.communicate(timeout=30)
    events += _json_lines(remaining)
    assert proc.returncode == 0
    names = [e["event"] for e in events]
    assert "workload_admitted" in names and "daemon_stopping" in names
    unreadable = sorted(Path(e["file"]).name for e in events if e["event"] == "manifest_unreadable")
    assert unreadable == ["dangling.yaml", "latin.yaml", "list.yaml"]


def test_a_pending_reason_says_when_its_numbers_count_a_shared_pool(tmp_path: Path, capsys) -> None:
    lender = cluster_queue("a", quotas("default", cpu=("10", None, "2")), cohort="co")
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all([namespace("ns"), flavor("default"), lender,
                                        cluster_queue("b", quotas("default", cpu="0"), cohort="co"),
                                        local_queue("lq", "ns", "b"), workload("big", "ns", "lq", cpu="3")]))
    assert main(["simulate", "-o", "json", str(path)]) == 0
    reason = json.loads(capsys.readouterr().out)["workloads"]["ns/big"]["reason"]
    assert "cohort co: cpu 0 used + 3 requested > 2 quota (counted in its shared pool" in reason


def test_json_output_never_writes_a_word_where_a_quantity_belongs(tmp_path: Path, capsys) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all([namespace("ns"), flavor("default"),
                                        cluster_queue("cq", quotas("default", cpu="1e100000000")),
                                        local_queue("lq", "ns", "cq"), workload("a", "ns", "lq", cpu="1")]))
    assert main(["simulate", "-o", "json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "unlimited" not in out
    assert json.loads(out)["queues"]["ClusterQueue/cq"]["quota"] == {"default": {"cpu": "9223372036854775807"}}
