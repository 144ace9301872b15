"""A local Kubernetes control plane for tests and development: kube-apiserver on etcd.

kueued reads and writes API objects; it needs an apiserver, not nodes. This package
gives it a real one, as controller-runtime's envtest does for Go operators:

    versions.py      the Kubernetes and etcd versions, and the build cache's layout
    gomod.py         wrapper go.mod files, so Go builds the releases from the module proxy
    build.py         ``ensure_built()``: build once per version into ~/.cache, then a no-op
    pki.py           a CA, serving cert, service-account key, client certs per user
    kubeconfig.py    kubeconfigs with the certs embedded
    processes.py     child servers in their own sessions; health polling with a deadline
    controlplane.py  ``ControlPlane``: etcd + kube-apiserver on 127.0.0.1, start/stop
    dev.py           ``up``/``down``: a detached supervisor for a long-lived dev cluster
    __main__.py      ``python -m kueued.devcluster build | up | down | env``

Nothing here is imported by the daemon, and only ``pki`` needs a package beyond kueued's
own dependencies (``cryptography``), so importing ``build`` works without it.
"""

from kueued.devcluster.versions import ETCD_VERSION, KUBERNETES_VERSION

__all__ = ["ETCD_VERSION", "KUBERNETES_VERSION"]
