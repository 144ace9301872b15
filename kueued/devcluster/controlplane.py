"""A real kube-apiserver on a real etcd, the way controller-runtime's envtest runs them.

There are no nodes, kubelets or controllers: objects are stored, validated, admitted,
authorised and watched exactly as in a cluster, and nothing acts on them except what the
test (or kueued) does. That is all kueued needs: it reads and writes API objects.

Start-up is etcd, then the PKI, then the apiserver, each waited for before the next:
etcd's ``/health`` and the apiserver's ``/readyz`` (asked with the admin's client cert,
since anonymous requests are refused until RBAC's bootstrap roles exist). Ports are
picked free on 127.0.0.1 just before each start; if a server loses the race for its
port it is started again on new ones. Nothing listens anywhere but 127.0.0.1.

State (etcd's data, certificates, logs) sits in one directory: a temporary one that
:meth:`ControlPlane.stop` removes, or one the caller names, which the caller owns and
which is kept (``python -m kueued.devcluster up`` keeps its logs in ``.dev-cluster``).

The apiserver's flags follow envtest's defaults: RBAC authorisation, the
ServiceAccount admission plugin off (no controller creates default service accounts
here), privileged pods allowed, a service CIDR because one is required. Extra flags
(``--max-requests-inflight`` for a benchmark, ``--audit-log-path`` for audit tests) are
appended, and a flag given there (as ``--name=value``) replaces the default of that name.

``audit=True`` turns on the audit log of :mod:`kueued.devcluster.audit` (Workload and
Lease writes only, one line each): :attr:`ControlPlane.audit_log`, read with
:meth:`ControlPlane.audit_events`.
"""

from __future__ import annotations

import json
import shutil
import ssl
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from kueued.devcluster import audit as auditing
from kueued.devcluster import kubeconfig
from kueued.devcluster.build import ensure_built
from kueued.devcluster.errors import ControlPlaneError
from kueued.devcluster.pki import CertPair, Pki
from kueued.devcluster.processes import Child, free_port, http_ok, lost_port_race, wait_until
from kueued.devcluster.versions import Binaries

_PORT_ATTEMPTS = 3


class ControlPlane:
    """etcd plus kube-apiserver on 127.0.0.1; use as ``with ControlPlane() as cp: ...``."""

    def __init__(
        self,
        *,
        binaries: Binaries | None = None,
        state_dir: Path | None = None,
        apiserver_args: Sequence[str] = (),
        start_timeout: float = 120.0,
        stop_timeout: float = 20.0,
        audit: bool = False,
    ) -> None:
        self._binaries = binaries
        self._own_state = state_dir is None
        self.state_dir = Path(tempfile.mkdtemp(prefix="kueued-control-plane-")) if state_dir is None else state_dir
        self.apiserver_args = list(apiserver_args)
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.audit = audit
        self.etcd: Child | None = None
        self.apiserver: Child | None = None
        self.etcd_url = ""
        self.server = ""
        self._pki: Pki | None = None

    # -- what a client needs --------------------------------------------------------------

    @property
    def pki(self) -> Pki:
        if self._pki is None:
            raise ControlPlaneError("control-plane", "not started")
        return self._pki

    @property
    def ca_cert(self) -> Path:
        return self.pki.ca.cert

    @property
    def admin(self) -> CertPair:
        return self.pki.admin

    @property
    def kubeconfig(self) -> Path:
        """The admin's kubeconfig (group ``system:masters``), written at start."""
        return self.state_dir / "kubeconfig"

    @property
    def audit_log(self) -> Path | None:
        """The apiserver's audit log (JSON lines), or None when started without ``audit``."""
        return self.state_dir / "logs" / "audit.log" if self.audit else None

    def audit_events(self) -> list[auditing.AuditEvent]:
        """Every Workload and Lease write the apiserver has answered so far, oldest first."""
        if self.audit_log is None:
            raise ControlPlaneError("control-plane", "started without audit=True: there is no audit log")
        return auditing.read_events(self.audit_log)

    @property
    def pids(self) -> list[int]:
        return [c.pid for c in (self.etcd, self.apiserver) if c is not None and c.pid is not None]

    def mint_user(self, user: str, groups: Sequence[str] = ()) -> CertPair:
        """A client cert for ``user``; it can do only what RBAC bindings grant it."""
        return self.pki.client(user, groups)

    def write_kubeconfig(self, path: Path, *, user: str = "admin", client: CertPair | None = None) -> Path:
        """A kubeconfig for ``client`` (the admin by default), with everything embedded."""
        text = kubeconfig.render(server=self.server, ca_cert=self.ca_cert, client=client or self.admin, user=user)
        return kubeconfig.write(path, text)

    def user_kubeconfig(self, user: str, groups: Sequence[str] = (), *, path: Path | None = None) -> Path:
        """Mint ``user`` and write a kubeconfig for it (next to the admin's unless ``path``)."""
        client = self.mint_user(user, groups)
        return self.write_kubeconfig(path or client.cert.with_suffix(".kubeconfig"), user=user, client=client)

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> ControlPlane:
        bins = self._binaries or ensure_built()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._start_etcd(bins)
            self._pki = Pki(self.state_dir / "pki")
            self._start_apiserver(bins)
            self.write_kubeconfig(self.kubeconfig)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the apiserver, then etcd (so the apiserver never sees its store vanish)."""
        for child in (self.apiserver, self.etcd):
            if child is not None:
                child.stop(self.stop_timeout)
        if self._own_state:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def info(self) -> dict[str, object]:
        """What another process needs to use or clean up this control plane (``up`` writes it)."""
        return {
            "server": self.server,
            "etcd": self.etcd_url,
            "kubeconfig": str(self.kubeconfig),
            "ca_cert": str(self.ca_cert),
            "admin_cert": str(self.admin.cert),
            "admin_key": str(self.admin.key),
            "audit_log": str(self.audit_log) if self.audit_log is not None else None,
            "pids": {c.name: c.pid for c in (self.etcd, self.apiserver) if c is not None},
        }

    def info_json(self) -> str:
        return json.dumps(self.info(), indent=2)

    # -- the two servers --------------------------------------------------------------------

    def _start_etcd(self, bins: Binaries) -> None:
        for attempt in range(_PORT_ATTEMPTS):
            client_port, peer_port = free_port(), free_port()
            self.etcd_url = f"http://127.0.0.1:{client_port}"
            peer_url = f"http://127.0.0.1:{peer_port}"
            data_dir = self.state_dir / "etcd"
            shutil.rmtree(data_dir, ignore_errors=True)  # a retry starts from nothing
            self.etcd = Child("etcd", [
                str(bins.etcd),
                "--name=kueued-dev",
                f"--data-dir={data_dir}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=kueued-dev={peer_url}",
                "--unsafe-no-fsync",  # test data: durability only costs time
                "--log-level=warn",
            ], log=self.state_dir / "logs" / "etcd.log")
            self.etcd.start()
            try:
                wait_until(lambda: http_ok(f"{self.etcd_url}/health"), watch=[self.etcd],
                           timeout=self.start_timeout, what="etcd")
                return
            except ControlPlaneError:
                if attempt + 1 < _PORT_ATTEMPTS and not self.etcd.alive() and lost_port_race(self.etcd):
                    continue
                raise

    def _apiserver_argv(self, bins: Binaries, port: int) -> list[str]:
        pki = self.pki
        defaults = {
            "etcd-servers": self.etcd_url,
            "bind-address": "127.0.0.1",
            # Without it the apiserver looks for a default route to advertise, and there may be none.
            "advertise-address": "127.0.0.1",
            "secure-port": str(port),
            "tls-cert-file": str(pki.serving.cert),
            "tls-private-key-file": str(pki.serving.key),
            "client-ca-file": str(pki.ca.cert),
            "service-account-key-file": str(pki.service_account_pub),
            "service-account-signing-key-file": str(pki.service_account_key),
            "service-account-issuer": f"https://127.0.0.1:{port}",
            "service-cluster-ip-range": "10.0.0.0/24",
            "authorization-mode": "RBAC",
            "disable-admission-plugins": "ServiceAccount",
            "allow-privileged": "true",
        }
        extra = list(self.apiserver_args)
        if self.audit_log is not None:
            policy = auditing.write_policy(self.state_dir / "audit-policy.yaml")
            extra = auditing.apiserver_args(self.audit_log, policy) + extra  # a caller's flag comes last and wins
        extra_names = {arg.removeprefix("--").split("=", 1)[0] for arg in extra}
        argv = [str(bins.kube_apiserver)]
        argv += [f"--{name}={value}" for name, value in defaults.items() if name not in extra_names]
        return argv + extra

    def _start_apiserver(self, bins: Binaries) -> None:
        assert self.etcd is not None, "etcd starts first"
        ssl_context = ssl.create_default_context(cafile=str(self.pki.ca.cert))
        ssl_context.load_cert_chain(str(self.admin.cert), str(self.admin.key))
        for attempt in range(_PORT_ATTEMPTS):
            port = free_port()
            self.server = f"https://127.0.0.1:{port}"
            self.apiserver = Child("kube-apiserver", self._apiserver_argv(bins, port),
                                   log=self.state_dir / "logs" / "kube-apiserver.log")
            self.apiserver.start()
            try:
                # etcd is watched too: an apiserver whose store died would only time out.
                wait_until(lambda: http_ok(f"{self.server}/readyz", context=ssl_context),
                           watch=[self.etcd, self.apiserver], timeout=self.start_timeout, what="kube-apiserver")
                return
            except ControlPlaneError:
                if attempt + 1 < _PORT_ATTEMPTS and not self.apiserver.alive() and lost_port_race(self.apiserver):
                    continue
                raise
