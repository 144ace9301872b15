"""``kueued manifests``: what a cluster needs before kueued can run, as one YAML stream.

The stream is the CRDs of every kind kueued reads (:mod:`kueued.kube.crds`), then kueued's
Namespace, ServiceAccount and RBAC (:mod:`kueued.kube.rbac`), in the order
``kubectl apply --server-side -f -`` creates them.  Nothing is read from disk: the CRD
schemas are generated from the Structs each time, so the manifests cannot lag the code.
The dev cluster (``python -m kueued.devcluster up``) applies the same stream.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from kueued.kube.crds import crds as _crds
from kueued.kube.rbac import rbac as _rbac

__all__ = ["documents", "render"]

DEFAULT_NAMESPACE = "kueued-system"


class _Dumper(yaml.SafeDumper):
    """Plain YAML: no ``&id001`` anchors where two documents share a value (kubectl reads them, people don't)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


# kubectl reads YAML 1.1, where a bare y or n is a boolean; PyYAML does not, and would leave
# such a string unquoted.  Telling the dumper they resolve to bool makes it quote them.
_Dumper.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:y|Y|n|N)$"), list("yYnN"))


def documents(*, crds: bool = True, rbac: bool = True, user: str | None = None,
              namespace: str = DEFAULT_NAMESPACE) -> list[dict[str, Any]]:
    """The manifests themselves: CRDs first (with ``crds``), then RBAC (with ``rbac``)."""
    out: list[dict[str, Any]] = []
    if crds:
        out += _crds()
    if rbac:
        out += _rbac(namespace=namespace, user=user)
    return out


def render(*, crds: bool = True, rbac: bool = True, user: str | None = None,
           namespace: str = DEFAULT_NAMESPACE) -> str:
    """:func:`documents` as a multi-document YAML stream (``""`` when both are off).

    ``user`` binds kueued's roles to that user name as well as to its ServiceAccount;
    ``namespace`` holds the ServiceAccount, the lease Role and their bindings.
    """
    docs = documents(crds=crds, rbac=rbac, user=user, namespace=namespace)
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, explicit_start=True, width=120) if docs else ""
