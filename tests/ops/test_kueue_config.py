"""``kueued run --config`` takes Kueue's own Configuration file for the fields the two share."""

from __future__ import annotations

from pathlib import Path

import pytest

from kueued.cli import main
from kueued.config import ConfigError, load

KUEUE = """\
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: :8081
metrics:
  bindAddress: 127.0.0.1:9443
leaderElection:
  leaderElect: true
  resourceName: c1f6bfd2.kueue.x-k8s.io
  leaseDuration: 20s
  renewDeadline: 12s
  retryPeriod: 1500ms
fairSharing:
  enable: true
  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]
admissionFairSharing:
  usageHalfLifeTime: 168h
  usageSamplingInterval: 5m
  resourceWeights:
    nvidia.com/gpu: 2
integrations:
  frameworks: [batch/job]
"""


def test_kueue_s_configuration_sets_what_the_two_share(tmp_path: Path) -> None:
    path = tmp_path / "controller_manager_config.yaml"
    path.write_text(KUEUE)
    config = load(path)
    assert (config.metrics.address, config.metrics.port) == ("127.0.0.1", 9443)
    le = config.leader_election
    assert (le.enabled, le.name, le.namespace) == (True, "c1f6bfd2.kueue.x-k8s.io", "kueue-system")
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (20.0, 12.0, 1.5)
    assert config.fair_sharing.enabled
    afs = config.admission_fair_sharing
    assert (afs.enabled, afs.usage_half_life_time, afs.usage_sampling_interval) == (True, 7 * 24 * 3600.0, 300.0)
    assert afs.resource_weights == {"nvidia.com/gpu": 2.0}


def test_kueue_s_resources_section_is_read_not_ignored(tmp_path: Path) -> None:
    """Quota counts a pod's requests as the cluster's Kueue did: its excluded prefixes and transformations."""
    path = tmp_path / "controller_manager_config.yaml"
    path.write_text(KUEUE + "resources:\n  excludeResourcePrefixes: [example.com/]\n  transformations:\n"
                            "  - input: nvidia.com/mig-1g.5gb\n    strategy: Replace\n"
                            "    outputs: {example.com/accelerator-memory: 5Gi}\n")
    resources = load(path).resources
    assert resources.exclude_resource_prefixes == ["example.com/"]
    (t,) = resources.transformations
    assert (t.input, t.strategy, t.outputs) == ("nvidia.com/mig-1g.5gb", "Replace",
                                                 {"example.com/accelerator-memory": "5Gi"})


def test_kueue_s_object_retention_is_read(tmp_path: Path) -> None:
    path = tmp_path / "controller_manager_config.yaml"
    path.write_text(KUEUE + "objectRetentionPolicies:\n  workloads:\n    afterFinished: 1h\n")
    retention = load(path).object_retention
    assert (retention.workloads_after_finished, retention.workloads_after_deactivated_by_kueue) == (3600.0, None)


def test_the_elastic_quota_section_is_read_from_kueue_s_file_too(tmp_path: Path) -> None:
    path = tmp_path / "kueue.yaml"
    path.write_text("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
                    "elasticQuota:\n  delayEvictTime: 30s\n  monitorAllQuotas: true\n")
    config = load(path)
    assert (config.elastic_quota.delay_evict_time, config.elastic_quota.monitor_all_quotas) == (30.0, True)


def test_a_bad_duration_in_kueue_s_file_names_the_field_and_its_line(tmp_path: Path) -> None:
    path = tmp_path / "kueue.yaml"
    path.write_text(KUEUE.replace("leaseDuration: 20s", "leaseDuration: twenty"))
    with pytest.raises(ConfigError) as caught:
        load(path)
    text = str(caught.value)
    assert f"{path}:11: leaderElection.leaseDuration" in text and "invalid duration" in text


def test_a_yaml_file_that_is_not_kueue_s_configuration_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cq.yaml"
    path.write_text("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: a}\n")
    with pytest.raises(ConfigError, match="must be Kueue's Configuration"):
        load(path)


def test_config_check_reads_kueue_s_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "kueue.yaml"
    path.write_text(KUEUE)
    assert main(["config", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "metrics 127.0.0.1:9443" in out and "leader election kueue-system/c1f6bfd2.kueue.x-k8s.io" in out
    assert "fair sharing on" in out and "admission fair sharing on" in out
