"""The Configuration's ``tls`` section, checked as Kueue's ``validateTLS`` checks it.

Kueue parses the section with ``pkg/util/tlsconfig.ParseTLSOptions``, which leans on
``k8s.io/component-base/cli/flag``: ``TLSVersion`` for ``minVersion``, ``TLSCipherSuites``
for ``cipherSuites`` (the names Go's ``crypto/tls`` gives its suites, secure and insecure,
plus two legacy ChaCha20 names) and ``TLSCurvePreferences`` for ``curvePreferences``
(numeric ``tls.CurveID`` values the Go runtime knows).  A parse failure is one error on
``tls`` itself, the parts joined; only a section that parses is then checked for cipher
suites under TLS 1.3, which Go cannot configure.
"""

from __future__ import annotations

from .configuration_strict import strict
from .fields import Errors, child, index, integer, mapping, sequence, string

__all__ = ["validate_tls"]

_SECURE_SUITES = (  # tls.CipherSuites(), Go 1.25: what PreferredTLSCipherNames() lists
    "TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
)
_ACCEPTED_SUITES = frozenset(_SECURE_SUITES) | {
    # component-base keeps the pre-Go-1.14 ChaCha20 names
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
    # tls.InsecureCipherSuites(): accepted too, only not preferred
    "TLS_RSA_WITH_RC4_128_SHA", "TLS_RSA_WITH_3DES_EDE_CBC_SHA", "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA", "TLS_RSA_WITH_AES_128_CBC_SHA256", "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
}
_VERSIONS = ("VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13")  # cliflag.TLSVersion
# tls.CurveID values with a name (CurveP256, CurveP384, CurveP521, X25519, X25519MLKEM768, and
# Go 1.26's SecP256r1MLKEM768 and SecP384r1MLKEM1024): the rest read "CurveID(n)", unsupported.
_CURVES = frozenset({23, 24, 25, 29, 4587, 4588, 4589})
_PLEASE = "Please use VersionTLS12 or VersionTLS13"


def validate_tls(errs: Errors, value: object) -> None:
    if value is None:
        return
    path = "tls"
    tls = mapping(errs, value, path)
    strict(errs, tls, path, ("minVersion", "cipherSuites", "curvePreferences"))
    version = string(errs, tls.get("minVersion"), child(path, "minVersion"))
    suites = [string(errs, s, index(child(path, "cipherSuites"), i))
              for i, s in enumerate(sequence(errs, tls.get("cipherSuites"), child(path, "cipherSuites")))]
    curves = [integer(errs, c, index(child(path, "curvePreferences"), i))
              for i, c in enumerate(sequence(errs, tls.get("curvePreferences"), child(path, "curvePreferences")))]
    problems = [p for p in (_version_problem(version), _suites_problem(suites), _curves_problem(curves)) if p]
    if problems:
        errs.invalid(path, tls, "; ".join(problems))
    elif version == "VersionTLS13" and suites:
        errs.invalid(child(path, "cipherSuites"), suites, "may not be specified when `minVersion` is 'VersionTLS13'")


def _version_problem(version: str | None) -> str | None:
    if not version:
        return None  # the default, TLS 1.2
    if version in ("VersionTLS10", "VersionTLS11"):
        return f"invalid minVersion. {_PLEASE}"
    if version not in _VERSIONS:
        return f'invalid minVersion: unknown tls version "{version}". {_PLEASE}'
    return None


def _suites_problem(suites: list[str | None]) -> str | None:
    for suite in suites:
        if suite is not None and suite not in _ACCEPTED_SUITES:
            return (f"invalid cipher suites: Cipher suite {suite} not supported or doesn't exist. "
                    f"Please use the secure cipher names: [{' '.join(_SECURE_SUITES)}]")
    return None


def _curves_problem(curves: list[int | None]) -> str | None:
    seen: set[int] = set()
    for curve in curves:
        if curve is None:
            continue
        if not 0 < curve <= 65535:
            return f"invalid curve preferences: curve preference {curve} is out of range (must be 1-65535)"
        if curve in seen:
            return f"invalid curve preferences: duplicate curve preference {curve}"
        seen.add(curve)
        if curve not in _CURVES:
            return f"invalid curve preferences: curve preference {curve} is not supported by the current Go version"
    return None
