"""The Configuration's MultiKueue sub-sections Kueue's ``validateMultiKueue`` checks besides
the durations and origin: ClusterProfile credentials and the incremental dispatcher.

``clusterProfile`` lists exec-plugin access providers (``accessProviders``) or, deprecated,
``credentialsProviders``, never both; each needs a name and an ``execConfig`` with a command,
an apiVersion, named env vars and an interactiveMode (checks borrowed from client-go's
kubeconfig validation).  ``incrementalDispatcherConfig`` only goes with the incremental
dispatcher, and its ``stepSize`` is at least 1.
"""

from __future__ import annotations

from typing import Any

from .configuration_strict import strict
from .fields import Errors, child, index, integer, mapping, sequence, string

__all__ = ["cluster_profile", "incremental_dispatcher"]

_INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
_INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")  # clientcmdapi.ExecInteractiveMode


def cluster_profile(errs: Errors, value: object) -> None:
    """ClusterProfile credentials: ``accessProviders``, or the deprecated ``credentialsProviders``.

    The paths name the list, not the entry, as Kueue's do (``validateClusterProfileAccessProviders``)."""
    if value is None:
        return
    path = "multiKueue.clusterProfile"
    profile = mapping(errs, value, path)
    strict(errs, profile, path, frozenset({"accessProviders", "credentialsProviders"}))
    access = sequence(errs, profile.get("accessProviders"), child(path, "accessProviders"))
    legacy = sequence(errs, profile.get("credentialsProviders"), child(path, "credentialsProviders"))
    if access and legacy:
        errs.forbidden(child(path, "credentialsProviders"), "must not be specified when accessProviders is specified")
    providers_path = child(path, "accessProviders" if access else "credentialsProviders")
    exec_path = child(providers_path, "execConfig")
    for i, raw in enumerate(access or legacy):
        provider = mapping(errs, raw, index(providers_path, i))
        strict(errs, provider, index(providers_path, i), frozenset({"name", "execConfig"}))
        if not string(errs, provider.get("name"), child(providers_path, "name")):
            errs.required(child(providers_path, "name"), "must be specified")
        config = mapping(errs, provider.get("execConfig"), exec_path)
        for field in ("command", "apiVersion"):
            if not string(errs, config.get(field), child(exec_path, field)):
                errs.required(child(exec_path, field), "must be specified")
        for j, env in enumerate(sequence(errs, config.get("env"), child(exec_path, "env"))):
            var = mapping(errs, env, index(child(exec_path, "env"), j))
            if not string(errs, var.get("name"), child(child(exec_path, "env"), "name")):
                errs.required(child(child(exec_path, "env"), "name"), "must be specified")
        mode = string(errs, config.get("interactiveMode"), child(exec_path, "interactiveMode"))
        if not mode:
            errs.required(child(exec_path, "interactiveMode"), "must be specified")
        elif mode not in _INTERACTIVE_MODES:
            errs.not_supported(child(exec_path, "interactiveMode"), mode, _INTERACTIVE_MODES)


def incremental_dispatcher(errs: Errors, mk: dict[str, Any]) -> None:
    """``incrementalDispatcherConfig`` belongs to the incremental dispatcher; its step is at least 1."""
    if mk.get("incrementalDispatcherConfig") is None:
        return
    path = "multiKueue.incrementalDispatcherConfig"
    idc = mapping(errs, mk["incrementalDispatcherConfig"], path)
    strict(errs, idc, path, ("stepSize",))
    # Defaulting leaves an absent dispatcherName as the all-at-once dispatcher.
    if string(errs, mk.get("dispatcherName"), "multiKueue.dispatcherName") != _INCREMENTAL:
        errs.invalid(path, idc, "incrementalDispatcherConfig is only valid when dispatcherName "
                                "is set to the incremental dispatcher")
    step = integer(errs, idc.get("stepSize"), child(path, "stepSize"))
    if step is not None and step < 1:
        errs.invalid(child(path, "stepSize"), step, "must be greater than or equal to 1")
