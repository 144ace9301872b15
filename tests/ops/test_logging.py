"""The logs: JSON lines or console by --log-format (auto by default), and never a credential."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import structlog

from kueued import native
from kueued.logging import REDACTED, configure, json_wanted, redact

TOKEN = "sekrit-token-0123456789abcdef"
KEY_B64 = "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1JSUVzZWNyZXRrZXkKLS0tLS1FTkQgUFJJVkFURSBLRVktLS0tLQo="
CA_B64 = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUNhc2VjcmV0Y2EKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
PEM = "-----BEGIN PRIVATE KEY-----\nMIIEsecretkey\n-----END PRIVATE KEY-----"
SECRETS = (TOKEN, KEY_B64, CA_B64, "MIIEsecretkey", "MIICasecretca")

KUBECONFIG = f"""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "https://127.0.0.1:1", certificate-authority-data: {CA_B64}}}
users:
- name: u
  user:
    token: {TOKEN}
    client-key-data: {KEY_B64}
contexts:
- name: ctx
  context: {{cluster: c, user: u}}
current-context: ctx
"""




def _clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


@pytest.mark.parametrize("event", [
    pytest.param({"token": TOKEN}, id="token-key"),
    pytest.param({"user": {"client-key-data": KEY_B64, "password": "hunter2" + TOKEN}}, id="nested-keys"),
    pytest.param({"headers": [{"Authorization": f"Bearer {TOKEN}"}]}, id="header-in-list"),
    pytest.param({"error": f"request failed: Authorization: Bearer {TOKEN}"}, id="bearer-in-text"),
    pytest.param({"error": f"bad file:\n  token: {TOKEN}\n  client-key-data: {KEY_B64}"}, id="yaml-snippet"),
    pytest.param({"body": f'{{"kind": "TokenReview", "token": "{TOKEN}"}}'}, id="json-body"),
    pytest.param({"error": f"cannot load: {PEM} trailing"}, id="pem-block"),
    pytest.param({"error": f"ca {CA_B64}"}, id="base64-pem"),
])
def test_the_redactor_removes_credentials_and_keeps_the_context(event: dict) -> None:
    out = redact(None, "warning", {"event": "kube_request_failed", "cluster_queue": "cq", "tokens": 3, **event})
    text = json.dumps(out)
    _clean(text.replace("hunter2", ""))
    assert REDACTED in text and out["cluster_queue"] == "cq" and out["tokens"] == 3


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "console"])
def test_both_renderers_and_the_stdlib_route_redact(as_json: bool, capsys) -> None:
    configure(level="DEBUG", json=as_json)
    structlog.get_logger("t").warning("kube_request_failed", token=TOKEN, error=f"Bearer {TOKEN}")
    logging.getLogger("kubernetes_asyncio.rest").debug("response body: %s", f'{{"token": "{TOKEN}"}}')
    try:
        raise ValueError(f"client-key-data: {KEY_B64}")
    except ValueError:
        structlog.get_logger("t").exception("kube_configured")
    err = capsys.readouterr().err
    _clean(err)
    assert "kube_request_failed" in err and "response body" in err and "ValueError" in err
    if as_json:
        assert [json.loads(line)["event"] for line in err.splitlines()] == [
            "kube_request_failed", "response body: {\"token\": \"[REDACTED]\"}", "kube_configured"]


def test_auto_is_json_for_the_daemon_off_a_terminal(monkeypatch) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert json_wanted("auto", daemon=True) and not json_wanted("auto", daemon=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert not json_wanted("auto", daemon=True)
    assert json_wanted("json", daemon=False) and not json_wanted("console", daemon=True)


def _daemon(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "kueued.cli", *args], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env})


@pytest.mark.timeout(120)
def test_the_daemon_never_logs_the_kubeconfig_secrets(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "copied-by-mistake.yaml").write_text(KUBECONFIG)  # a kind nobody reads: refused, by name
    (manifests / "broken.yaml").write_text(KUBECONFIG + "  oops: [\n")  # unreadable: its error is logged
    config = tmp_path / "kueued.toml"
    config.write_text(f'[kube]\nkubeconfig = "{kubeconfig}"\n[log]\nlevel = "DEBUG"\nformat = "json"\n')
    proc = _daemon("run", "--manifests", str(manifests), "--config", str(config), "--interval", "0.05",
                   env={"KUBECONFIG": str(kubeconfig)})
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if json.loads(line)["event"] == "daemon_ready":
            break
    proc.send_signal(signal.SIGTERM)
    lines.append(proc.communicate(timeout=30)[1])
    text = "".join(lines)
    _clean(text)
    events = [json.loads(line) for line in text.splitlines()]
    assert {e["event"] for e in events} >= {"manifest_unreadable", "object_rejected", "daemon_ready"}
    ready = next(e for e in events if e["event"] == "daemon_ready")
    assert ready["engine"] == native.engine()  # which engine runs: compiled, or pure and why


@pytest.mark.timeout(120)
@pytest.mark.parametrize("extra", [
    pytest.param(["--context", "nope"], id="unknown-context"),
    pytest.param([], id="unusable-key"),  # the loader takes it; TLS set-up refuses the key
])
@pytest.mark.parametrize("fmt", ["json", "console"])
def test_the_kube_clients_errors_never_show_the_kubeconfig_secrets(tmp_path: Path, extra: list[str],
                                                                   fmt: str) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    done = subprocess.run([sys.executable, "-m", "kueued.cli", "--log-format", fmt, "--log-level", "DEBUG", "run",
                           "--kubeconfig", str(kubeconfig), *extra], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    _clean(done.stderr + done.stdout)
