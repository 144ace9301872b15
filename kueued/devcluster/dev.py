"""``up`` / ``down``: a control plane that outlives the command that started it.

``up`` builds if needed, then spawns ``python -m kueued.devcluster serve`` in a new
session (so it survives the shell, and a Ctrl-C there does not reach it) and waits for
it to say it is ready. ``serve`` is the supervisor: it runs a :class:`ControlPlane` in
the state directory, writes ``ready.json`` once the apiserver answers ``/readyz``, and
stays until SIGTERM, or until etcd or the apiserver dies, stopping the other. ``down``
sends the supervisor SIGTERM and removes the state directory.

The state directory (``.dev-cluster`` by default) holds everything::

    kubeconfig           the admin's (system:masters), embedded certs
    bin/                 links to kubectl, kube-apiserver, etcd in the build cache
    supervisor.pid       the supervisor's pid; supervisor.log its output
    ready.json           server URL, pids, cert paths (written by the supervisor)
    pki/ etcd/ logs/     certificates, etcd's data, each server's log
    .kueued-dev-cluster  marks the directory as ours: `down` removes only such a directory

After the apiserver is ready, :func:`provision` applies kueued's own objects: the CRDs
and RBAC that ``kueued manifests`` prints (:func:`kueued.kube.manifests.render`), then
waits until the API server serves every CRD.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from kueued.devcluster.build import Progress, ensure_built
from kueued.devcluster.controlplane import ControlPlane
from kueued.devcluster.errors import ControlPlaneError, log_tail
from kueued.devcluster.versions import Binaries
from kueued.kube.crds import KINDS
from kueued.kube.manifests import render

MARKER = ".kueued-dev-cluster"
DEV_USER = "kueued"  # bound to kueued's roles besides its ServiceAccount
_READY_TIMEOUT_S = 180.0
_STOP_TIMEOUT_S = 45.0

Provision = Callable[[Path, Binaries, Progress], None]


def provision(kubeconfig: Path, bins: Binaries, progress: Progress) -> None:
    """Apply kueued's CRDs and RBAC to a fresh cluster and wait until every CRD is served.

    The same stream as ``kueued manifests --user kueued``, applied server-side as a user
    would pipe it: the roles are bound to the user ``kueued`` as well, so a client
    certificate for that name (``ControlPlane.user_kubeconfig``) runs kueued with exactly
    the daemon's permissions, as the integration tests do.  kueued's objects are kueued's:
    a field another manager set is taken over (``--force-conflicts``).
    ``up(after_ready=...)`` takes any other such function (or None to skip this).
    """
    kubectl = [str(bins.kubectl), "--kubeconfig", str(kubeconfig)]
    applied = subprocess.run([*kubectl, "apply", "--server-side", "--force-conflicts", "--field-manager=kueued",
                              "-f", "-"], input=render(user=DEV_USER), capture_output=True, text=True)
    if applied.returncode != 0:
        raise ControlPlaneError("provision", "kubectl apply of kueued's CRDs and RBAC failed",
                                tail=applied.stderr.strip())
    # A CRD is accepted before it is served: wait, so whatever runs next can create objects.
    crds = [f"crd/{kind.name}" for kind in KINDS]
    served = subprocess.run([*kubectl, "wait", "--for=condition=Established", "--timeout=60s", *crds],
                            capture_output=True, text=True)
    if served.returncode != 0:
        raise ControlPlaneError("provision", "kueued's CRDs were not established", tail=served.stderr.strip())
    progress(f"applied kueued's {len(crds)} CRDs and RBAC (namespace kueued-system)")


def up(state_dir: Path, *, apiserver_args: Sequence[str] = (), progress: Progress,
       after_ready: Provision | None = provision) -> dict[str, object]:
    bins = ensure_built(progress=progress)
    state_dir = state_dir.resolve()  # the supervisor runs elsewhere; a relative path would move
    running = _running_pid(state_dir)
    if running is not None:
        if not (state_dir / "ready.json").exists():
            raise ControlPlaneError("dev-cluster", f"supervisor pid {running} is still starting; see "
                                    f"{state_dir / 'supervisor.log'}")
        progress(f"already running (supervisor pid {running}); `down` first to start afresh")
        return _ready_info(state_dir)
    _kill_servers(state_dir)  # a supervisor that was SIGKILLed leaves its servers running
    _clear(state_dir)
    state_dir.mkdir(parents=True)
    (state_dir / MARKER).write_text("made by `python -m kueued.devcluster up`; removed by `down`\n")
    _link_binaries(state_dir / "bin", bins)
    command = [sys.executable, "-m", "kueued.devcluster", "serve", "--state-dir", str(state_dir)]
    command += [f"--apiserver-arg={arg}" for arg in apiserver_args]
    log = state_dir / "supervisor.log"
    with open(log, "ab") as out:
        supervisor = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                      start_new_session=True, cwd=state_dir)
    (state_dir / "supervisor.pid").write_text(f"{supervisor.pid}\n")
    progress(f"starting control plane (supervisor pid {supervisor.pid}, log: {log})")
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while not (state_dir / "ready.json").exists():
        if supervisor.poll() is not None:
            raise ControlPlaneError("supervisor", f"exited with code {supervisor.returncode}", log=log,
                                    tail=log_tail(log))
        if time.monotonic() > deadline:
            supervisor.terminate()  # it stops whatever it had started
            supervisor.wait()
            raise ControlPlaneError("supervisor", f"not ready after {_READY_TIMEOUT_S:.0f}s", log=log,
                                    tail=log_tail(log))
        time.sleep(0.2)
    # The supervisor lives on, adopted by init once we exit. Telling Popen it is done keeps
    # it from warning at exit that a child is still running, which is the whole point.
    supervisor.returncode = 0
    info = _ready_info(state_dir)
    kubeconfig = Path(str(info["kubeconfig"]))
    if after_ready is not None:
        after_ready(kubeconfig, bins, progress)
    return info


def serve(state_dir: Path, *, apiserver_args: Sequence[str] = ()) -> int:
    """The supervisor's body: run a control plane until told to stop or a server dies."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    cp = ControlPlane(state_dir=state_dir, apiserver_args=apiserver_args)
    try:
        cp.start()
        info = cp.info() | {"supervisor": os.getpid()}
        tmp = state_dir / ".ready.json"
        tmp.write_text(json.dumps(info, indent=2))
        os.replace(tmp, state_dir / "ready.json")
        print(f"ready: {cp.server}", flush=True)
        while not stop.wait(1.0):
            for child in (cp.etcd, cp.apiserver):
                if child is not None and not child.alive():
                    print(f"{child.name} exited; stopping (log: {child.log})", flush=True)
                    return 1
        print("stopping", flush=True)
        return 0
    finally:
        cp.stop()
        (state_dir / "ready.json").unlink(missing_ok=True)


def down(state_dir: Path, *, progress: Progress) -> None:
    if not state_dir.exists():
        progress(f"nothing to stop: no {state_dir}")
        return
    pid = _running_pid(state_dir)
    if pid is not None:
        progress(f"stopping supervisor pid {pid}")
        os.kill(pid, signal.SIGTERM)
        if not _wait_gone(pid, _STOP_TIMEOUT_S):
            progress(f"supervisor {pid} still there after {_STOP_TIMEOUT_S:.0f}s: killing it and its servers")
            os.kill(pid, signal.SIGKILL)
    _kill_servers(state_dir)
    _clear(state_dir)
    progress(f"removed {state_dir}")


def _ready_info(state_dir: Path) -> dict[str, object]:
    return json.loads((state_dir / "ready.json").read_text())


def _running_pid(state_dir: Path) -> int | None:
    try:
        pid = int((state_dir / "supervisor.pid").read_text())
    except (OSError, ValueError):
        return None
    # A stale pid file may name a process that has nothing to do with us.
    return pid if _alive(pid) and "kueued.devcluster" in _cmdline(pid) else None


def _kill_servers(state_dir: Path) -> None:
    """SIGKILL etcd and the apiserver if a supervisor that was killed or crashed left them."""
    try:
        pids = _ready_info(state_dir).get("pids", {})
    except (OSError, ValueError):
        return
    for name, pid in pids.items() if isinstance(pids, dict) else ():
        # The pid may since have gone to someone else: kill it only if it is still that server.
        if pid and _alive(int(pid)) and name in _cmdline(int(pid)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(int(pid), signal.SIGKILL)  # each server leads its own process group


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); it is gone for our purposes.
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _clear(state_dir: Path) -> None:
    """Remove a state directory, but only one we made: `--state-dir ~` must not wipe a home."""
    if not state_dir.exists():
        return
    if not (state_dir / MARKER).exists() and any(state_dir.iterdir()):
        raise ControlPlaneError("dev-cluster", f"{state_dir} is not empty and was not made by `up`; not touching it")
    shutil.rmtree(state_dir)


def _link_binaries(bin_dir: Path, bins: Binaries) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, target in bins.as_dict().items():
        link = bin_dir / name
        link.unlink(missing_ok=True)
        link.symlink_to(target)

