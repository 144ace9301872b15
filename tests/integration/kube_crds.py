"""Install the CRDs of every kind kueued watches into a test cluster.

Prefers kueued's own (:func:`kueued.kube.manifests.render`, CRDs only), so the tests run
against the schemas a user installs; without that module, minimal CRDs of the same
names, with ``x-kubernetes-preserve-unknown-fields`` schemas and the status subresource.
Applied server-side with the field manager the other integration tests use, so a session
that installs either way ends with one set of CRDs and no conflict.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from kueued.kube.client import KINDS

FIELD_MANAGER = "kueued-it"


def _minimal(kind: str) -> dict[str, Any]:
    k = KINDS[kind]
    open_schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{k.plural}.{k.group}"},
        "spec": {
            "group": k.group,
            "scope": "Namespaced" if k.namespaced else "Cluster",
            "names": {"plural": k.plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
            "versions": [{"name": k.version, "served": True, "storage": True,
                          "subresources": {"status": {}}, "schema": {"openAPIV3Schema": open_schema}}],
        },
    }


def crd_documents() -> list[dict[str, Any]]:
    """kueued's CRDs when it renders them, else minimal ones."""
    try:
        from kueued.kube.manifests import render
    except ImportError:
        return [_minimal(kind) for kind, k in KINDS.items() if k.group]
    try:
        text = render(rbac=False)
    except TypeError:  # an older signature: everything, CRDs among it
        text = render()
    docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    return [d for d in docs if d.get("kind") == "CustomResourceDefinition"]


def install_crds(cluster: Any) -> list[str]:
    """Apply the CRDs to ``cluster`` (a conftest ``Cluster``) and wait until they are served."""
    docs = crd_documents()
    # JSON, not YAML: kubectl reads YAML 1.1, where a bare `y` would be a boolean.
    stream = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    cluster.kubectl_run("apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}",
                        "-f", "-", stdin=stream)
    names = [f"crd/{d['metadata']['name']}" for d in docs]
    cluster.kubectl_run("wait", "--for=condition=Established", "--timeout=60s", *names)
    return names
