"""The control plane's certificates: one CA, a serving cert, a service-account key, client certs.

kube-apiserver authenticates clients by certificate when ``--client-ca-file`` names the CA
that signed them: the subject's CN is the user name and each O is a group. So one CA does
all the work: it signs the serving cert (for 127.0.0.1 and localhost, the only addresses
we bind), the admin's cert (group ``system:masters``, which RBAC lets do anything) and
any further user a test mints, such as kueued's own, which is then bound to no more RBAC
than the project grants it.

Keys are ECDSA P-256: a fraction of a millisecond to generate against tens of
milliseconds for RSA, and the apiserver accepts them everywhere, the service-account
token signer (ES256) included. Certificates live for a year with an hour's leeway into
the past, so a long-running dev cluster and a skewed clock both keep working.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=365)
_LEEWAY = datetime.timedelta(hours=1)


@dataclass(frozen=True)
class CertPair:
    """A certificate and its private key, as PEM files."""

    cert: Path
    key: Path


class Pki:
    """A CA and everything it signs, written as PEM files into one directory.

    Creating one generates the CA, the serving cert and the service-account key pair;
    :meth:`client` mints client certs on demand (minting a user again replaces its files).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kueued-dev-ca")])
        self._ca_cert = (
            _builder(name, self._ca_key.public_key())
            .issuer_name(name)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(_key_usage(cert_sign=True), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._ca_key.public_key()), critical=False)
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca = self._write("ca", self._ca_cert, self._ca_key)
        self.serving = self._sign(
            "apiserver", x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
            usage=ExtendedKeyUsageOID.SERVER_AUTH,
            san=x509.SubjectAlternativeName([
                x509.DNSName("localhost"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            ]),
        )
        sa_key = ec.generate_private_key(ec.SECP256R1())
        self.service_account_key = _write_key(directory / "sa.key", sa_key)
        self.service_account_pub = directory / "sa.pub"
        self.service_account_pub.write_bytes(sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        self.admin = self.client("admin", groups=("system:masters",))

    def client(self, user: str, groups: Sequence[str] = ()) -> CertPair:
        """A client cert for ``user`` in ``groups``; the apiserver reads CN as user, O as groups."""
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
        return self._sign(f"user-{_slug(user)}", x509.Name(attrs), usage=ExtendedKeyUsageOID.CLIENT_AUTH)

    def _sign(self, stem: str, subject: x509.Name, *, usage: x509.ObjectIdentifier,
              san: x509.SubjectAlternativeName | None = None) -> CertPair:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            _builder(subject, key.public_key())
            .issuer_name(self._ca_cert.subject)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(cert_sign=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._ca_key.public_key()),
                           critical=False)
        )
        if san is not None:
            builder = builder.add_extension(san, critical=False)
        return self._write(stem, builder.sign(self._ca_key, hashes.SHA256()), key)

    def _write(self, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> CertPair:
        cert_path = self.directory / f"{stem}.crt"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return CertPair(cert=cert_path, key=_write_key(self.directory / f"{stem}.key", key))


def _builder(subject: x509.Name, public_key: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _LEEWAY)
        .not_valid_after(now + _VALIDITY)
    )


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
        key_agreement=False, key_cert_sign=cert_sign, crl_sign=cert_sign, encipher_only=False,
        decipher_only=False,
    )


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> Path:
    path.touch(mode=0o600)
    path.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return path


def _slug(user: str) -> str:
    """A file name for a user name such as ``system:serviceaccount:ns:name``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", user)
