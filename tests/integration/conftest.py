"""Integration tests against a real kube-apiserver: the ``control_plane`` fixture.

One control plane per session (a start takes seconds; a build, the first time, takes
minutes). Which cluster, in order of preference:

- ``KUEUED_TEST_KUBECONFIG=path``: an existing cluster (kind: ``make e2e-kind``); nothing is
  started.  User ``kueued`` is then kueued's ServiceAccount (a token, bound by the same
  manifests); tests that need our own CA (other users), binaries or audit log skip.
- otherwise a local :class:`~kueued.devcluster.controlplane.ControlPlane`, built first
  if the binaries are not cached yet, with the apiserver's audit log on (Workload and
  Lease writes only: :mod:`kueued.devcluster.audit`; the split-brain test's witness).

When that is impossible (no Go and nothing cached, or no ``cryptography``) every test
here is skipped with one line saying why, unless ``KUEUED_REQUIRE_CONTROL_PLANE=1``
(CI sets it), in which case they fail: CI must never pass by skipping.

The first build does not fit the project's 300 s per-test timeout, and pytest-timeout
times fixture set-up as part of whichever test asks for it first. So when the binaries
are not cached, every test that needs them gets a longer timeout; in a warm run nothing
changes. Every test here carries the ``control_plane`` marker: ``-m "not control_plane"``
leaves them out.

The control plane's modules are imported inside fixtures, never at collection: a missing
``cryptography`` must skip these tests, not break collection of the whole suite.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueued.devcluster import build
from kueued.devcluster.versions import Binaries, binaries

REQUIRE = os.environ.get("KUEUED_REQUIRE_CONTROL_PLANE") == "1"
EXTERNAL = os.environ.get("KUEUED_TEST_KUBECONFIG")
# A cold build: 8.5 minutes on an idle two-core machine, 19 on a busy one; CI's run has 45.
BUILD_TIMEOUT_S = 35 * 60
MARKER = "control_plane"
HERE = Path(__file__).parent
_SKIP_REASON = pytest.StashKey[str | None]()


@dataclass
class Cluster:
    """What a test needs to talk to the cluster; ``control_plane`` is None for an external one."""

    kubeconfig: Path
    kubectl: Path
    server: str
    admin_cert: Path | None
    admin_key: Path | None
    cache_dir: Path  # kubectl's discovery cache: per session, never ~/.kube
    control_plane: Any = None
    _users: dict[str, Path] = field(default_factory=dict)

    def kubectl_run(self, *args: str, kubeconfig: Path | None = None, stdin: str | None = None,
                    check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.kubectl), f"--kubeconfig={kubeconfig or self.kubeconfig}",
                   f"--cache-dir={self.cache_dir}", *args]
        result = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            pytest.fail(f"{' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
        return result

    def kubectl_json(self, *args: str, kubeconfig: Path | None = None) -> Any:
        return json.loads(self.kubectl_run(*args, "-o", "json", kubeconfig=kubeconfig).stdout)

    def user_kubeconfig(self, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig for a freshly minted user with no RBAC of its own."""
        if self.control_plane is None and user == "kueued" and not groups:
            if user not in self._users:  # kueued's ServiceAccount, bound by the same manifests
                self._users[user] = self._service_account_kubeconfig("kueued-system", "kueued")
            return self._users[user]
        if self.control_plane is None:
            pytest.skip("an external cluster: no CA of ours to mint users with")
        if user not in self._users:
            self._users[user] = self.control_plane.user_kubeconfig(user, groups)
        return self._users[user]


    def _service_account_kubeconfig(self, ns: str, account: str) -> Path:
        """A kubeconfig with a fresh token of ``ns/account`` and the admin kubeconfig's cluster entry."""
        token = self.kubectl_run("create", "token", account, "-n", ns, "--duration=4h").stdout.strip()
        config = yaml.safe_load(self.kubeconfig.read_text())
        context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
        cluster = next(c for c in config["clusters"] if c["name"] == context["cluster"])
        path = self.cache_dir / f"{account}.kubeconfig"
        path.touch(mode=0o600)
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "clusters": [cluster], "current-context": account,
            "contexts": [{"name": account, "context": {"cluster": cluster["name"], "user": account}}],
            "users": [{"name": account, "user": {"token": token}}]}))
        return path


def _unavailable() -> str | None:
    """Why no cluster can be had here, or None if one can."""
    if EXTERNAL:
        if not Path(EXTERNAL).is_file():
            return f"KUEUED_TEST_KUBECONFIG={EXTERNAL} does not exist"
        if not (build.runs(_kubectl_program()) or shutil.which("kubectl")):
            return "KUEUED_TEST_KUBECONFIG is set but there is no kubectl (built or on PATH)"
        return None
    try:
        import cryptography  # noqa: F401
    except ImportError:
        return "the `cryptography` package is not installed (needed for the control plane's certificates)"
    if build.find_go() is None and not build.is_cached():
        return ("no `go` found (on PATH or in /usr/local/go) and the control-plane binaries are not "
                "built yet")
    return None


def _kubectl_program() -> build.Program:
    return next(p for t in build.targets() for p in t.programs if p.output.name == "kubectl")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marker added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ours = [item for item in items if HERE in item.path.parents]
    if not ours:
        return
    reason = None if REQUIRE else _unavailable()
    cold = reason is None and not EXTERNAL and not build.is_cached()
    for item in ours:
        item.add_marker(MARKER)
        # A socket of an HTTP client another test cancelled mid-request can be collected (and
        # reported, unraisable) during whichever test runs then: known, bounded, and not this
        # test's fault; every other warning is still an error here.
        item.add_marker(pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"))
        item.add_marker(pytest.mark.filterwarnings("ignore:unclosed:ResourceWarning"))
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"integration tests skipped: {reason}"))
        elif cold and "cp_binaries" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.timeout(BUILD_TIMEOUT_S))
    config.stash[_SKIP_REASON] = reason


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    reason = config.stash.get(_SKIP_REASON, None)
    if reason:
        terminalreporter.write_line(f"tests/integration skipped: {reason}")


@pytest.fixture(scope="session")
def cp_binaries(request: pytest.FixtureRequest) -> Binaries | None:
    """The built binaries (None with an external cluster); builds them, showing progress, if needed."""
    if REQUIRE and (reason := _unavailable()):
        pytest.fail(f"KUEUED_REQUIRE_CONTROL_PLANE=1, but {reason}")
    if EXTERNAL:
        return None
    if build.is_cached():
        return binaries()
    capture = request.config.pluginmanager.getplugin("capturemanager")
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    if capture is None or reporter is None:
        return build.ensure_built()

    def progress(line: str) -> None:
        # Minutes of silence look like a hang: show the build's progress past the capture.
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"[devcluster] {line}")
            reporter.flush()

    return build.ensure_built(progress=progress)


@pytest.fixture(scope="session")
def control_plane(cp_binaries: Binaries | None, tmp_path_factory: pytest.TempPathFactory,
                  request: pytest.FixtureRequest) -> Iterator[Cluster]:
    if (shared := request.config.stash.get(SHARED_CLUSTER, None)) is not None:
        yield shared  # tests/reliability's fixture (tests/reliability/conftest.py) started it first
        return
    cache_dir = tmp_path_factory.mktemp("kubectl-cache")
    if cp_binaries is None:
        yield _shared(request.config, _external(Path(str(EXTERNAL)), cache_dir))
        return
    from kueued.devcluster.controlplane import ControlPlane

    bins = cp_binaries
    with ControlPlane(binaries=bins, audit=True) as cp:
        yield _shared(request.config, Cluster(kubeconfig=cp.kubeconfig, kubectl=bins.kubectl, server=cp.server,
                                              admin_cert=cp.admin.cert, admin_key=cp.admin.key,
                                              cache_dir=cache_dir, control_plane=cp))
    del request.config.stash[SHARED_CLUSTER]


SHARED_CLUSTER = pytest.StashKey[Cluster]()
"""The session's one cluster, for every directory whose conftest imports ``control_plane``."""


def _shared(config: pytest.Config, cluster: Cluster) -> Cluster:
    config.stash[SHARED_CLUSTER] = cluster
    return cluster


@pytest.fixture(scope="session")
def installed(control_plane: Cluster) -> Cluster:
    """The cluster with ``kueued manifests`` applied (CRDs Established, roles bound to user ``kueued``)."""
    from kueued.kube.manifests import render
    control_plane.kubectl_run("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=render(user="kueued"))
    control_plane.kubectl_run("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    return control_plane


@pytest.fixture
def daemon(installed: Cluster, tmp_path: Path) -> Iterator[Any]:
    """``kueued run`` on the cluster, as its own process; stopped after the test, which it must
    survive (a clean exit) having written only JSON lines."""
    from tests.integration.daemon import Daemon
    d = Daemon(installed, tmp_path / "kueued.log").start()
    try:
        yield d
    finally:
        if d.proc is not None and d.proc.poll() is None:
            assert d.stop() == 0
        for line in d.log_path.read_text().splitlines():
            json.loads(line)


def _external(kubeconfig: Path, cache_dir: Path) -> Cluster:
    config = yaml.safe_load(kubeconfig.read_text())
    context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
    server = next(c["cluster"]["server"] for c in config["clusters"] if c["name"] == context["cluster"])
    kubectl = _kubectl_program().output if build.runs(_kubectl_program()) else Path(shutil.which("kubectl") or "")
    return Cluster(kubeconfig=kubeconfig, kubectl=kubectl, server=server, admin_cert=None, admin_key=None,
                   cache_dir=cache_dir)
