"""Connecting: where the configuration comes from, TLS, secrets kept out of logs, and an unreachable server.

No cluster needed: an unreachable server is a port nobody listens on.  The source's
retries against it are checked through the injected sleep, which records each wait and
never sleeps.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
import yaml
from structlog.testing import capture_logs

from kueued.kube.backoff import Backoff
from kueued.kube.connect import IN_CLUSTER, config_source, connect, proxy_for
from kueued.kube.errors import ApiUnavailable, KubeConfigError
from kueued.kube.watch import ClusterSource

TOKEN = "s3cr3t-token-never-logged"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again on leaving: nothing listens there


def _kubeconfig(path: Path, server: str, *, insecure: bool = False) -> Path:
    cluster: dict[str, object] = {"server": server}
    if insecure:
        cluster["insecure-skip-tls-verify"] = True
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": cluster}],
        "users": [{"name": "test", "user": {"token": TOKEN}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
    }))
    return path


@pytest.mark.parametrize(("given", "env", "home_config", "expected"), [
    pytest.param("explicit.yaml", {"KUBECONFIG": "env.yaml"}, True, "explicit.yaml", id="explicit-first"),
    pytest.param(None, {"KUBECONFIG": "a.yaml:b.yaml"}, True, "a.yaml:b.yaml", id="env-next-merged-list"),
    pytest.param(None, {}, True, "HOME", id="home-next"),
    pytest.param(None, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, False, IN_CLUSTER, id="in-cluster-last"),
    pytest.param(None, {"KUBECONFIG": ""}, True, "HOME", id="empty-env-ignored"),
])
def test_the_configuration_is_found_in_kubectl_s_order(tmp_path: Path, given, env, home_config, expected) -> None:
    home = tmp_path / "home"
    if home_config:
        (home / ".kube").mkdir(parents=True)
        (home / ".kube" / "config").write_text("{}")
    found = config_source(Path(given) if given else None, environ=env, home=home)
    assert found == (str(home / ".kube" / "config") if expected == "HOME" else expected)


def test_no_configuration_anywhere_is_a_kube_config_error(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError):
        config_source(None, environ={}, home=tmp_path)


async def test_a_missing_kubeconfig_file_is_a_kube_config_error(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError):
        await connect(tmp_path / "nope.yaml")


async def test_a_kubeconfig_that_is_not_yaml_is_a_kube_config_error_that_says_where(tmp_path: Path) -> None:
    bad = tmp_path / "kc"
    bad.write_text("apiVersion: v1\nclusters: [\n  - {name: x\n")
    with pytest.raises(KubeConfigError, match=r"not valid YAML \(line 3, column 3\)"):
        await connect(bad)


async def test_an_unusable_client_key_is_a_kube_config_error_and_its_bytes_are_not_shown(tmp_path: Path) -> None:
    bad = tmp_path / "kc"
    bad.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": {"client-certificate-data": "bm90IGEgY2VydA==",
                                         "client-key-data": "bm90IGEga2V5"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}))
    with pytest.raises(KubeConfigError, match="cannot use the credentials") as caught:
        await connect(bad)
    assert "bm90IGEga2V5" not in str(caught.value) and "not a key" not in str(caught.value)


async def test_turning_tls_verification_off_is_logged_and_no_secret_is(tmp_path: Path) -> None:
    server = f"https://127.0.0.1:{_closed_port()}"
    with capture_logs() as logs:
        async with await connect(_kubeconfig(tmp_path / "kc", server)) as kube:
            assert kube.api.configuration.verify_ssl
        async with await connect(_kubeconfig(tmp_path / "kc", server), insecure_skip_tls_verify=True) as kube:
            assert not kube.api.configuration.verify_ssl
        async with await connect(_kubeconfig(tmp_path / "kc-insecure", server, insecure=True)):
            pass
    warnings = [(e["event"], e["by"]) for e in logs if e["log_level"] == "warning"]
    assert warnings == [("tls_verification_disabled", "flag"), ("tls_verification_disabled", "kubeconfig")]
    assert TOKEN not in repr(logs) and str(tmp_path) not in repr(logs)


@pytest.mark.parametrize(("no_proxy", "through_proxy"), [("", True), ("127.0.0.1", False)],
                         ids=["proxied", "no-proxy-bypasses"])
async def test_the_environment_s_proxy_is_used_and_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            no_proxy: str, through_proxy: bool) -> None:
    """HTTPS_PROXY and NO_PROXY are honoured as kubectl honours them, read when connecting: the
    session does not look at the environment (or ~/.netrc) again on each request."""
    seen: list[bytes] = []

    async def proxy(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            seen.append(await stream.receive())

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    server = f"https://127.0.0.1:{_closed_port()}"
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, proxy)
        async with await connect(_kubeconfig(tmp_path / "kc", server)) as kube:
            assert kube.api.rest_client.pool_manager.trust_env is False
            with pytest.raises(ApiUnavailable):
                await kube.list("Workload")
        tg.cancel_scope.cancel()
    assert bool(seen) == through_proxy
    if through_proxy:
        assert seen[0].startswith(f"CONNECT {server.removeprefix('https://')} ".encode())


def test_a_proxy_is_chosen_by_the_server_s_scheme() -> None:
    proxies = {"https": "http://proxy:3128", "http": "http://plain:80"}
    assert proxy_for("https://10.0.0.1:6443", proxies) == "http://proxy:3128"
    assert proxy_for("http://10.0.0.1:8080", proxies) == "http://plain:80"
    assert proxy_for("https://10.0.0.1:6443", {}) is None


async def test_an_unreachable_server_is_unavailable_and_the_source_keeps_retrying(tmp_path: Path) -> None:
    server = f"https://127.0.0.1:{_closed_port()}"
    waits: list[float] = []

    async with await connect(_kubeconfig(tmp_path / "kc", server)) as kube:
        with pytest.raises(ApiUnavailable) as caught:
            await kube.list("Workload")
        assert caught.value.status is None and caught.value.reason == "ConnectionError"
        assert caught.value.__cause__ is not None

        with capture_logs() as logs:
            async with anyio.create_task_group() as tg:
                async def sleep(seconds: float) -> None:  # injected: records, never sleeps
                    waits.append(seconds)
                    if len(waits) == 6:
                        tg.cancel_scope.cancel()
                    await anyio.lowlevel.checkpoint()

                source = ClusterSource(kube, kinds=("Workload",), sleep=sleep,
                                       backoff=Backoff(rng=random.Random(5)), clock=lambda: 0.0)
                tg.start_soon(source.run)
    assert not source.synced
    expected = Backoff(rng=random.Random(5))
    assert waits == [expected.delay(n) for n in range(6)]
    assert source.restarts["Workload"] == 6
    restarted = [e for e in logs if e["event"] == "watch_restarted"]
    assert [e["attempt"] for e in restarted] == [1, 2, 3, 4, 5, 6]
    assert {e["reason"] for e in restarted} == {"ConnectionError"}
    assert TOKEN not in repr(logs)
