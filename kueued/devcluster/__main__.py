"""``python -m kueued.devcluster build | up | down | env | serve``: the local control plane's CLI.

Separate from ``kueued``'s own CLI on purpose: this is developer tooling (it builds Go
programs and starts servers) and the daemon should not grow a dependency on it.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from kueued.devcluster.build import ensure_built
from kueued.devcluster.errors import BuildError, ControlPlaneError
from kueued.devcluster.versions import ETCD_VERSION, KUBERNETES_VERSION, binaries

EPILOG = """examples:
  python -m kueued.devcluster build                      # build kube-apiserver, kubectl, etcd once
  python -m kueued.devcluster up                         # start one in .dev-cluster/, in the background
  python -m kueued.devcluster up --apiserver-arg=--max-requests-inflight=5000
  python -m kueued.devcluster down                       # stop it and remove .dev-cluster/
  eval "$(python -m kueued.devcluster env)"              # KUBE_APISERVER, KUBECTL, ETCD for scripts
"""


def _say(line: str) -> None:
    print(f"[devcluster] {line}", file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m kueued.devcluster",
        description=f"A local Kubernetes control plane (kube-apiserver {KUBERNETES_VERSION} on etcd "
                    f"{ETCD_VERSION}, no nodes) built from source with Go, for tests and development.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build the binaries into the cache unless they are there already")
    for name, text in (("up", "build if needed and start a control plane in the background"),
                       ("serve", "run a control plane in the foreground until SIGTERM (what `up` spawns)")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--state-dir", type=Path, default=Path(".dev-cluster"))
        p.add_argument("--apiserver-arg", action="append", default=[], metavar="--FLAG=VALUE",
                       help="an extra kube-apiserver flag (repeatable); replaces a default of the same name")
    down = sub.add_parser("down", help="stop the control plane `up` started and remove its state directory")
    down.add_argument("--state-dir", type=Path, default=Path(".dev-cluster"))
    sub.add_parser("env", help="print the binaries' paths as shell assignments")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        match args.command:
            case "build":
                for name, path in ensure_built(progress=_say).as_dict().items():
                    print(f"{name}: {path}")
            case "up":
                from kueued.devcluster.dev import up
                info = up(args.state_dir, apiserver_args=args.apiserver_arg, progress=_say)
                _print_usage(args.state_dir, info)
            case "serve":
                from kueued.devcluster.dev import serve
                return serve(args.state_dir, apiserver_args=args.apiserver_arg)
            case "down":
                from kueued.devcluster.dev import down
                down(args.state_dir, progress=_say)
            case "env":
                for name, path in binaries().as_dict().items():
                    print(f"{name.upper().replace('-', '_')}={shlex.quote(str(path))}")
                print(f"KUBERNETES_VERSION={KUBERNETES_VERSION}")
                print(f"ETCD_VERSION={ETCD_VERSION}")
    except (BuildError, ControlPlaneError) as exc:
        _say(f"error: {exc}")
        return 1
    return 0


def _print_usage(state_dir: Path, info: dict[str, object]) -> None:
    kubeconfig = Path(str(info["kubeconfig"])).resolve()
    kubectl = state_dir / "bin" / "kubectl"
    print(f"control plane ready at {info['server']} (kube-apiserver {KUBERNETES_VERSION}, etcd {ETCD_VERSION})")
    print(f"  export KUBECONFIG={kubeconfig}")
    print(f"  {kubectl} get ns")
    print(f"  logs: {state_dir / 'logs'}/; stop with: python -m kueued.devcluster down --state-dir {state_dir}")


if __name__ == "__main__":
    sys.exit(main())
