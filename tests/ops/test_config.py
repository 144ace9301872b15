"""The config file: strict decoding with FILE:LINE errors, `kueued config check`, flags over file over defaults."""

from __future__ import annotations

import argparse
from pathlib import Path

import msgspec
import pytest

from kueued.cli import _parser, main
from kueued.cli.daemon import settle
from kueued.config import DEFAULTS, Config, ConfigError, configuration_manifest, line_of, load
from kueued.world import World

SHIPPED = Path(__file__).parents[2] / "config" / "kueued.toml"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "kueued.toml"
    path.write_text(text)
    return path


def test_the_shipped_file_is_all_defaults_and_names_every_setting() -> None:
    assert load(SHIPPED) == DEFAULTS
    uncommented = "\n".join(line.lstrip("# ") for line in SHIPPED.read_text().splitlines())
    for section in msgspec.structs.fields(Config):
        value = getattr(DEFAULTS, section.name)
        keys = [f"{section.name}.{f.name}" for f in msgspec.structs.fields(value)] if isinstance(
            value, msgspec.Struct) else [section.name]
        for key in keys:
            assert line_of(uncommented, key), f"{key} is not documented in config/kueued.toml"


@pytest.mark.parametrize("text, line, key, why", [
    pytest.param("[metrics]\nport = 70000\n", 2, "metrics.port", "<= 65535", id="out-of-range"),
    pytest.param("# c\n[metrics]\naddress = '::'\nportt = 9\n", 4, "metrics.portt", "unknown key", id="unknown-key"),
    pytest.param("[log]\nlevel = 'LOUD'\n", 2, "log.level", "Invalid enum value 'LOUD'", id="bad-enum"),
    pytest.param("[daemon]\n\ninterval = 0\n", 3, "daemon.interval", ">= 0.01", id="zero-interval"),
    pytest.param("[daemon]\nstatus_writes_per_second = 0\n", 2, "daemon.status_writes_per_second", ">= 0.1",
                 id="no-status-writes"),
    pytest.param("[metric]\nport = 1\n", 1, "metric", "unknown key", id="unknown-table"),
    pytest.param("[kube]\njob_integration = 'yes'\n", 2, "kube.job_integration", "Expected `bool`", id="type"),
    pytest.param("[fair_sharing]\nenabled = true\npreemption_strategies = ['Nope']\n", 3,
                 "fair_sharing.preemption_strategies", "Unsupported value", id="kueue-validation"),
    pytest.param("[feature_gates]\nA = 1\n", 1, "feature_gates", "Expected `bool`", id="gate-value"),
    pytest.param("[metrics\nport = 1\n", 1, "", "not valid TOML", id="syntax"),
])
def test_a_bad_value_names_the_key_and_its_line(tmp_path: Path, text: str, line: int, key: str, why: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load(path)
    (problem,) = caught.value.problems
    assert (problem.file, problem.line, problem.key) == (str(path), line, key)
    assert why in problem.reason
    assert str(problem).startswith(f"{path}:{line}: ")


def test_config_check_prints_a_summary_or_the_errors(tmp_path: Path, capsys) -> None:
    good = _write(tmp_path, "[metrics]\nport = 9464\n[fair_sharing]\nenabled = true\n")
    assert main(["config", "check", str(good)]) == 0
    out = capsys.readouterr().out.strip()
    assert out.count("\n") == 0 and "metrics 127.0.0.1:9464" in out and "fair sharing on" in out
    bad = tmp_path / "bad.toml"
    bad.write_text("[leader_election]\nenabled = true\nlease_duration = 5.0\n")
    assert main(["config", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:1: leader_election:" in err and "renew deadline" in err
    assert main(["config", "check", str(tmp_path / "missing.toml")]) == 2
    assert "cannot read" in capsys.readouterr().err


def _run_args(*argv: str) -> argparse.Namespace:
    return _parser().parse_args(["run", "--manifests", ".", *argv])


def test_flags_override_the_file_which_overrides_the_defaults(tmp_path: Path) -> None:
    path = _write(tmp_path, "[metrics]\nport = 9464\naddress = '0.0.0.0'\n[daemon]\ninterval = 5\n"
                            "[leader_election]\nname = 'from-file'\n[log]\nlevel = 'INFO'\n")
    args = _run_args("--config", str(path), "--metrics-port", "9999", "--leader-elect")
    live = settle(args)
    assert (args.metrics_port, args.metrics_address, args.interval) == (9999, "0.0.0.0", 5.0)
    assert (args.leader_elect, args.leader_elect_name, args.leader_elect_namespace) == (True, "from-file",
                                                                                        "kueued-system")
    assert live is not None and live.config.log.level == "INFO" and live.config.metrics.port == 9999
    args = _run_args()  # no file: the defaults, from the one place they are written
    assert settle(args) is None
    assert (args.interval, args.metrics_port, args.leader_elect_lease_duration) == (
        DEFAULTS.daemon.interval, DEFAULTS.metrics.port, DEFAULTS.leader_election.lease_duration)


def test_run_refuses_a_bad_file_before_starting(tmp_path: Path, capsys) -> None:
    path = _write(tmp_path, "[metrics]\nport = -1\n")
    assert main(["run", "--manifests", str(tmp_path), "--config", str(path)]) == 2
    assert f"{path}:2: metrics.port" in capsys.readouterr().err


def test_the_scheduling_sections_become_a_kueue_configuration() -> None:
    assert configuration_manifest(DEFAULTS) is None  # nothing to apply: a Configuration object keeps its say
    cfg = load_text("[fair_sharing]\nenabled = true\n[elastic_quota]\ndelay_evict_time = 30\n"
                    "[feature_gates]\nFairSharingPreemptWithinNominal = false\n")
    world = World()
    manifest = configuration_manifest(cfg)
    assert manifest is not None
    world.apply(manifest)
    assert world.rejected == {}
    assert world.settings.fair_sharing and world.settings.delay_evict_time == 30.0
    assert world.settings.feature_gates == {"FairSharingPreemptWithinNominal": False}


def load_text(text: str) -> Config:
    return msgspec.toml.decode(text, type=Config)


def test_the_resources_section_sets_what_quota_counts() -> None:
    """[resources] is Kueue's Configuration ``resources``: an excluded prefix counts for nothing, a
    transformation counts an input's units as its outputs (here the input is replaced)."""
    cfg = load_text('[resources]\nexclude_resource_prefixes = ["example.com/"]\n'
                    '[[resources.transformations]]\ninput = "nvidia.com/mig-1g.5gb"\nstrategy = "Replace"\n'
                    'outputs = { "example.com/accelerator-memory" = "5Gi", "cpu" = 2 }\n')
    manifest = configuration_manifest(cfg)
    assert manifest is not None and manifest["resources"] == {
        "excludeResourcePrefixes": ["example.com/"],
        "transformations": [{"input": "nvidia.com/mig-1g.5gb", "strategy": "Replace",
                             "outputs": {"example.com/accelerator-memory": "5Gi", "cpu": 2}}]}
    world = World()
    world.apply(manifest)
    assert world.rejected == {}
    assert list(world.settings.excluded_prefixes) == ["example.com/"]
    (transformation,) = world.settings.transformations
    assert transformation.input == "nvidia.com/mig-1g.5gb" and transformation.strategy == "Replace"


@pytest.mark.parametrize("text, key, why", [
    pytest.param('[[resources.transformations]]\ninput = "a"\nstrategy = "Swap"\n',
                 "resources.transformations.strategy", "Invalid enum value 'Swap'", id="strategy"),
    pytest.param('[[resources.transformations]]\ninput = "a"\noutputs = { b = "lots" }\n',
                 "resources.transformations", "", id="quantity"),
])
def test_a_bad_transformation_is_refused_with_its_key(tmp_path: Path, text: str, key: str, why: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(_write(tmp_path, text))
    (problem,) = caught.value.problems
    assert problem.key == key and why in problem.reason


def test_object_retention_becomes_kueue_s_policy() -> None:
    cfg = load_text("[object_retention]\nworkloads_after_finished = 3600\nworkloads_after_deactivated_by_kueue = 0\n")
    manifest = configuration_manifest(cfg)
    assert manifest is not None and manifest["objectRetentionPolicies"] == {
        "workloads": {"afterFinished": "3600s", "afterDeactivatedByKueue": "0s"}}
    world = World()
    world.apply(manifest)
    assert (world.settings.retain_finished, world.settings.retain_deactivated) == (3600.0, 0.0)
    assert World().settings.retain_finished is None  # by default everything is kept


def _borrowers(tmp_path: Path) -> Path:
    """b1 (older) asks all of cq-c's 4 cpu, a1 (2 cpu) half: both would borrow.  Classically b1 goes
    first and a borrowing queue reclaims nothing, so a1 waits; with fair sharing a1's queue, whose
    share stays the lower, gets the quota (ordered first, or preempting b1: LessThanInitialShare)."""
    from tests.builders import cluster_queue, flavor, local_queue, namespace, quotas, workload
    docs = [namespace("ns"), flavor("default"),
            cluster_queue("cq-a", quotas("default", cpu="0"), cohort="co", preemption={"reclaimWithinCohort": "Any"}),
            cluster_queue("cq-b", quotas("default", cpu="0"), cohort="co"),
            cluster_queue("cq-c", quotas("default", cpu="4"), cohort="co"),
            local_queue("a", "ns", "cq-a"), local_queue("b", "ns", "cq-b"),
            workload("b1", "ns", "b", created=0, cpu="4"), workload("a1", "ns", "a", created=2, cpu="2")]
    path = tmp_path / "borrowers.yaml"
    path.write_text("---\n".join(msgspec.json.encode(d).decode() + "\n" for d in docs))
    return path


@pytest.mark.parametrize("command", ["simulate", "status"])
def test_the_operator_commands_read_the_daemon_s_config_file(tmp_path: Path, capsys, command: str) -> None:
    files = str(_borrowers(tmp_path))
    toml = tmp_path / "kueued.toml"
    toml.write_text("[fair_sharing]\nenabled = true\n")
    outcomes = []
    for extra in ([], ["--config", str(toml)]):
        assert main([command, files, "-o", "json", *extra]) == 0
        out = msgspec.json.decode(capsys.readouterr().out)
        if command == "simulate":
            outcomes.append(out["workloads"]["ns/a1"]["state"])
        else:
            outcomes.append(sorted(n for n, node in out["nodes"].items() if node["admitted"]))
    assert outcomes[0] != outcomes[1]  # fair sharing, as the daemon would run it, decides otherwise
    assert outcomes == (["pending", "admitted"] if command == "simulate" else
                        [["ClusterQueue/cq-b", "Cohort/co"], ["ClusterQueue/cq-a", "Cohort/co"]])
