"""A module CA and the certificates it signs, with `cryptography` (ECDSA P-256, PEM text)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Sequence

import cryptography
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_VALIDITY = dt.timedelta(days=3650)
CERT_VALIDITY = dt.timedelta(days=365)
RENEW_BEFORE = dt.timedelta(days=30)
# Tolerates clock skew between the hook and the clients.
BACKDATE = dt.timedelta(minutes=5)
# In a cluster the hooks import the Deckhouse image's own cryptography (44.0.1 in its site-packages,
# which come before lib/python/dist on sys.path: D126), not the one the bundle pins. What this module
# calls exists since 42.0 (`not_valid_before_utc`/`not_valid_after_utc`); an older image fails on
# import with the reason instead of an AttributeError halfway through issuing a certificate.
OLDEST_CRYPTOGRAPHY = (42, 0)


def require_cryptography(version: str) -> None:
    """Raise unless `version` (a `cryptography.__version__`) is OLDEST_CRYPTOGRAPHY or newer."""
    match = re.match(r"(\d+)\.(\d+)", version)
    found = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
    if found < OLDEST_CRYPTOGRAPHY:
        oldest = ".".join(map(str, OLDEST_CRYPTOGRAPHY))
        raise RuntimeError(
            f"hooks/lib/tls.py needs cryptography >= {oldest}, this interpreter imports {version}: "
            "the Deckhouse image's own packages come before lib/python/dist on sys.path (D126); "
            f"run the module on a Deckhouse release whose image ships cryptography >= {oldest}"
        )


require_cryptography(cryptography.__version__)


@dataclasses.dataclass(frozen=True)
class KeyPair:
    crt: str
    key: str


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def generate_ca(common_name: str, now: dt.datetime, validity: dt.timedelta = CA_VALIDITY) -> KeyPair:
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM).decode(), _key_pem(key))


def issue_certificate(
    ca: KeyPair,
    common_name: str,
    dns_names: Sequence[str],
    now: dt.datetime,
    validity: dt.timedelta = CERT_VALIDITY,
) -> KeyPair:
    """A server certificate for `dns_names`, never valid past its CA."""
    ca_cert = x509.load_pem_x509_certificate(ca.crt.encode())
    ca_key = serialization.load_pem_private_key(ca.key.encode(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an ECDSA key")
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(min(now + validity, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(name) for name in dns_names]), critical=False
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM).decode(), _key_pem(key))


def _load(pair: KeyPair) -> x509.Certificate | None:
    """The certificate when it parses and `key` is its private key; None otherwise."""
    try:
        cert = x509.load_pem_x509_certificate(pair.crt.encode())
        key = serialization.load_pem_private_key(pair.key.encode(), password=None)
    except (ValueError, TypeError):
        return None
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    matches = key.public_key().public_bytes(
        serialization.Encoding.PEM, public
    ) == cert.public_key().public_bytes(serialization.Encoding.PEM, public)
    return cert if matches else None


def _fresh(cert: x509.Certificate, now: dt.datetime) -> bool:
    return cert.not_valid_before_utc <= now + BACKDATE and cert.not_valid_after_utc - now > RENEW_BEFORE


def usable_ca(pair: KeyPair, now: dt.datetime) -> bool:
    """Parses, key matches, is a CA, and does not expire within RENEW_BEFORE."""
    cert = _load(pair)
    if cert is None or not _fresh(cert, now):
        return False
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return False
    return constraints.ca


def usable_certificate(pair: KeyPair, ca: KeyPair, dns_names: Sequence[str], now: dt.datetime) -> bool:
    """Parses, key matches, signed by `ca`, has exactly `dns_names`, not expiring within RENEW_BEFORE."""
    cert = _load(pair)
    if cert is None or not _fresh(cert, now):
        return False
    try:
        cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.crt.encode()))
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
        return False
    return sorted(names.get_values_for_type(x509.DNSName)) == sorted(dns_names)
