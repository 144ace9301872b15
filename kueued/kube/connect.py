"""Connecting to a cluster: where its configuration comes from, and a client for it.

:func:`config_source` picks, as kubectl does, the kubeconfig given, ``$KUBECONFIG``,
``~/.kube/config``, or the pod's in-cluster configuration; :func:`connect` loads it with
kubernetes_asyncio's loaders (which handle client certificates, bearer tokens and their
refresh) and wraps the result in a :class:`~kueued.kube.client.KubeClient`.  A refreshed
token is never written back into the user's file.

Proxies are read from the environment once, here, as kubectl reads them (``HTTPS_PROXY``,
``NO_PROXY`` and their kin); the HTTP session is then told not to look again.  kubernetes_asyncio's
session trusts the environment, and aiohttp then parses ``~/.netrc`` and the proxy variables in a
worker thread on every request: two thread hops per write, a tenth of kueued's CPU on Kueue's
large-scale config through the API server.

Security: TLS verification stays on unless asked off (logged as a warning every time);
nothing here logs a token, a key or the kubeconfig, only the server's URL and where the
configuration came from.
"""

from __future__ import annotations

import os
import ssl
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import structlog
import yaml
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config import ConfigException, load_incluster_config, load_kube_config

from kueued.kube.client import KubeClient
from kueued.kube.errors import KubeConfigError

__all__ = ["IN_CLUSTER", "USER_AGENT", "config_source", "connect", "proxy_for", "stop_env_lookups"]

log = structlog.get_logger("kueued.kube")

USER_AGENT = "kueued/0.1"
IN_CLUSTER = "in-cluster"


def config_source(kubeconfig: Path | None = None, *, environ: Mapping[str, str] | None = None,
                  home: Path | None = None) -> str:
    """Where the configuration comes from: the file given, ``$KUBECONFIG``, ``~/.kube/config``, in-cluster.

    ``$KUBECONFIG`` may list several files (``a:b``), merged as kubectl merges them.
    """
    env = os.environ if environ is None else environ
    if kubeconfig is not None:
        return str(kubeconfig)
    if env.get("KUBECONFIG"):
        return env["KUBECONFIG"]
    default = (home or Path.home()) / ".kube" / "config"
    if default.is_file():
        return str(default)
    if env.get("KUBERNETES_SERVICE_HOST"):
        return IN_CLUSTER
    raise KubeConfigError("no kubeconfig (none given, $KUBECONFIG unset, no ~/.kube/config) and not in a pod "
                          "(KUBERNETES_SERVICE_HOST unset)")


async def connect(kubeconfig: Path | None = None, *, context: str | None = None,
                  insecure_skip_tls_verify: bool = False, request_timeout: float = 60.0) -> KubeClient:
    """A client for the cluster that ``kubeconfig`` (or the environment, see :func:`config_source`) names.

    ``insecure_skip_tls_verify`` turns server certificate checks off, for a test cluster;
    it is logged as a warning, as is a kubeconfig that asks for the same.
    """
    source = config_source(kubeconfig)
    config = Configuration()
    try:
        if source == IN_CLUSTER:
            load_incluster_config(client_configuration=config)
        else:
            if kubeconfig is not None and not kubeconfig.is_file():
                raise KubeConfigError(f"{kubeconfig}: no such kubeconfig file")
            # persist_config=False: a refreshed token is never written back into the user's file.
            await load_kube_config(config_file=source, context=context, client_configuration=config,
                                   persist_config=False)
    except yaml.YAMLError as exc:  # where in the file, never what it holds
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 1}, column {where.column + 1})" if where is not None else ""
        raise KubeConfigError(f"cannot load the cluster configuration from {source}: "
                              f"not valid YAML{at}") from exc
    except (ConfigException, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        # The loader's messages name files and fields, not their contents.
        raise KubeConfigError(f"cannot load the cluster configuration from {source}: "
                              f"{type(exc).__name__}: {exc}") from exc
    if insecure_skip_tls_verify:
        config.verify_ssl = False
        log.warning("tls_verification_disabled", server=config.host, by="flag")
    elif not config.verify_ssl:
        log.warning("tls_verification_disabled", server=config.host, by="kubeconfig")
    if not config.proxy:
        config.proxy = proxy_for(config.host or "")
    try:
        api = ApiClient(configuration=config)
        stop_env_lookups(api)
    except (ssl.SSLError, OSError, ValueError) as exc:  # a client certificate or key that cannot be used
        raise KubeConfigError(f"cannot use the credentials in {source}: {type(exc).__name__}: "
                              f"{getattr(exc, 'reason', None) or 'the client certificate or key is not usable'}"
                              ) from exc
    api.user_agent = USER_AGENT
    log.info("kube_configured", server=config.host, source=source if source == IN_CLUSTER else "kubeconfig",
             context=context or "")
    return KubeClient(api, request_timeout=request_timeout)


def proxy_for(server: str, proxies: Mapping[str, str] | None = None) -> str | None:
    """The proxy the environment names for ``server`` (None: connect directly), as kubectl picks it."""
    parts = urlsplit(server)
    proxies = urllib.request.getproxies() if proxies is None else proxies
    proxy = proxies.get(parts.scheme or "https")
    if not proxy or (parts.hostname and urllib.request.proxy_bypass(parts.hostname)):
        return None
    return proxy


def stop_env_lookups(api: ApiClient) -> None:
    """The same connection pool in a session that does not read the environment per request
    (module notes): ``detach`` hands the pool over without closing it."""
    rest = api.rest_client
    old: aiohttp.ClientSession = rest.pool_manager
    rest.pool_manager = aiohttp.ClientSession(connector=old.connector, trust_env=False,
                                              read_bufsize=2**21)  # as kubernetes_asyncio reads watches
    old.detach()
