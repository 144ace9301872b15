"""Kubeconfigs with everything embedded, so one file is all a client needs.

Embedding the CA, cert and key (rather than pointing at files) keeps a kubeconfig valid
when it is copied, and lets ``kubectl``, ``kubernetes_asyncio`` and kueued read it alike.
The file is written 0600 because it holds a private key.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import yaml

from kueued.devcluster.pki import CertPair

CLUSTER_NAME = "kueued-dev"


def render(*, server: str, ca_cert: Path, client: CertPair, user: str) -> str:
    def b64(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode("ascii")

    context = f"{user}@{CLUSTER_NAME}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CLUSTER_NAME,
                      "cluster": {"server": server, "certificate-authority-data": b64(ca_cert)}}],
        "users": [{"name": user,
                   "user": {"client-certificate-data": b64(client.cert), "client-key-data": b64(client.key)}}],
        "contexts": [{"name": context, "context": {"cluster": CLUSTER_NAME, "user": user}}],
        "current-context": context,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def write(path: Path, text: str) -> Path:
    """Write atomically and privately: a reader never sees half a file or a world-readable key."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)
    return path
