"""The one place that says which control plane we test against, and where it is cached.

Bumping Kubernetes or etcd is an edit here and nothing else: the wrapper modules, the
cache directories and the version checks all derive from these constants. Kubernetes
publishes its staging modules (``k8s.io/api``, ``k8s.io/client-go``, ...) as
``v0.MINOR.PATCH`` for release ``v1.MINOR.PATCH``; etcd publishes its sibling modules
(``go.etcd.io/etcd/api/v3``, ...) at the server's own version.

Binaries live outside the checkout, keyed by version, so that several checkouts and CI
runs on one machine share a build, and a version bump never runs a stale binary.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

KUBERNETES_VERSION = "v1.35.4"
ETCD_VERSION = "v3.6.16"


def staging_version(kubernetes_version: str) -> str:
    """``v1.35.4`` -> ``v0.35.4``: the tag Kubernetes gives its published staging modules."""
    major, minor, patch = kubernetes_version.removeprefix("v").split(".")
    if major != "1":
        raise ValueError(f"unexpected Kubernetes version {kubernetes_version!r}")
    return f"v0.{minor}.{patch}"


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/kueued/control-plane``: the same default as Go's own caches use."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kueued" / "control-plane"


@dataclass(frozen=True)
class Binaries:
    """Where the three binaries of one version live; present or not."""

    kube_apiserver: Path
    kubectl: Path
    etcd: Path

    def as_dict(self) -> dict[str, Path]:
        return {"kube-apiserver": self.kube_apiserver, "kubectl": self.kubectl, "etcd": self.etcd}


def binaries(root: Path | None = None) -> Binaries:
    root = root or cache_root()
    kube = root / KUBERNETES_VERSION
    return Binaries(
        kube_apiserver=kube / "kube-apiserver",
        kubectl=kube / "kubectl",
        etcd=root / f"etcd-{ETCD_VERSION}" / "etcd",
    )
