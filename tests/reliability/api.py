"""A small synchronous admin client for the reliability tests: what they do to the cluster and read of it.

The tests act as users and as the Jobs behind Workloads would (create Workloads, mark them
Finished), and they read the whole state back every second or so to check invariants.
``kubectl`` costs a process and a discovery round per call, far too slow for 2,000
Workloads polled for minutes; kueued's own client is async and is the thing under test. So
this is plain ``http.client`` over one keep-alive TLS connection per thread, authenticated
with the admin's client certificate (group ``system:masters``), never through the faulting
proxy: faults are kueued's to survive, not the test's.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import tempfile
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"


class ApiFailure(Exception):
    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        super().__init__(f"{status}: {body[:300].decode(errors='replace')}")


class Credentials:
    """The server, CA and client certificate of a kubeconfig whose data is embedded (the dev PKI's)."""

    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        self.kubeconfig = kubeconfig
        self.config = config
        self.server = cluster["server"]
        self._dir = Path(tempfile.mkdtemp(prefix="kueued-reliability-creds-"))
        self.ca = self._write("ca.crt", cluster["certificate-authority-data"])
        self.cert = self._write("client.crt", user["client-certificate-data"])
        self.key = self._write("client.key", user["client-key-data"])

    def _write(self, name: str, data: str) -> Path:
        path = self._dir / name
        path.touch(mode=0o600)
        path.write_bytes(base64.b64decode(data))
        return path

    def client_context(self) -> ssl.SSLContext:
        """Verifies the server against the kubeconfig's CA and presents its client certificate."""
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(str(self.cert), str(self.key))
        return context

    def pointing_at(self, server: str, path: Path) -> Path:
        """The same kubeconfig (CA and user), for another server URL: the proxy."""
        config = json.loads(json.dumps(self.config))
        context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
        next(c for c in config["clusters"] if c["name"] == context["cluster"])["cluster"]["server"] = server
        path.touch(mode=0o600)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path


class Admin:
    """Requests as the cluster admin; one connection per thread (``http.client`` is not thread-safe)."""

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        parts = urlsplit(credentials.server)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 443
        self._context = credentials.client_context()
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPSConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self._host, self._port, context=self._context, timeout=60)
            self._local.conn = conn
        return conn

    def request(self, method: str, path: str, body: Any = None, *,
                content_type: str = "application/json") -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in range(2):  # a keep-alive connection the server closed meanwhile: once more on a new one
            conn = self._connection()
            try:
                conn.request(method, path, body=data, headers=headers)
                response = conn.getresponse()
                payload = response.read()
                break
            except (http.client.HTTPException, OSError):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
        if not 200 <= response.status < 300:
            raise ApiFailure(response.status, payload)
        return json.loads(payload) if payload else {}

    def apply(self, *manifests: dict[str, Any]) -> None:
        """Server-side apply, as ``kubectl apply --server-side`` does."""
        for manifest in manifests:
            self.request("PATCH", object_path(manifest) + "?fieldManager=reliability&force=true", manifest,
                         content_type="application/apply-patch+yaml")

    def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", object_path(manifest, collection=True), manifest)

    def workloads(self, namespace: str) -> list[dict[str, Any]]:
        return self.request("GET", f"{KUEUE}/namespaces/{namespace}/workloads")["items"]

    def cluster_queue(self, name: str) -> dict[str, Any]:
        return self.request("GET", f"{KUEUE}/clusterqueues/{name}")

    def finish(self, workload: dict[str, Any], *, message: str = "the job succeeded") -> bool:
        """Mark ``workload`` Finished as the Job behind it would, on the version read (False on a 409)."""
        meta = workload["metadata"]
        conditions = [c for c in workload.get("status", {}).get("conditions", []) if c["type"] != "Finished"]
        conditions.append({"type": "Finished", "status": "True", "reason": "Succeeded", "message": message,
                           "lastTransitionTime": "2026-01-01T00:00:00Z"})
        body = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": {"conditions": conditions}}
        try:
            self.request("PATCH", f"{KUEUE}/namespaces/{meta['namespace']}/workloads/{meta['name']}/status", body,
                         content_type="application/merge-patch+json")
        except ApiFailure as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True

    def delete_all(self, namespace: str, *cluster_scoped: tuple[str, str]) -> None:
        """Every Workload and LocalQueue of ``namespace`` (a namespace itself never goes: no controller
        here finalises it), then each (plural, name) of the tree."""
        for plural in ("workloads", "localqueues"):
            self.request("DELETE", f"{KUEUE}/namespaces/{namespace}/{plural}")
        for plural, name in cluster_scoped:
            try:
                self.request("DELETE", f"{KUEUE}/{plural}/{name}")
            except ApiFailure as exc:
                if exc.status != 404:
                    raise


def object_path(manifest: dict[str, Any], *, collection: bool = False) -> str:
    api_version, kind = manifest["apiVersion"], manifest["kind"]
    meta = manifest["metadata"]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    plural = {"ResourceFlavor": "resourceflavors", "Cohort": "cohorts", "ClusterQueue": "clusterqueues",
              "LocalQueue": "localqueues", "Workload": "workloads", "Namespace": "namespaces"}[kind]
    if meta.get("namespace"):
        base += f"/namespaces/{meta['namespace']}"
    base += f"/{plural}"
    return base if collection else f"{base}/{meta['name']}"
