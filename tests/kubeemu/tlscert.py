"""A throwaway self-signed certificate for the emulator's HTTPS listener, made in pure Python.

kubectl (client-go) never sends credentials from a kubeconfig to a plain-HTTP server, so an
emulator that authenticates users has to speak TLS. This writes an ECDSA P-256 key and an X.509 v3
certificate valid for 127.0.0.1 and localhost (it is its own CA: clients trust it through
`certificate-authority-data`). No crypto package is needed: the curve arithmetic and the DER
encoding are small, and the key never leaves the test machine.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

# NIST P-256 (secp256r1).
_P = 0xFFFFFFFF00000001000000000000000000000000FFFFFFFFFFFFFFFFFFFFFFFF
_A = _P - 3
_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
_G = (
    0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296,
    0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5,
)

_Point = tuple[int, int] | None


def _add(p: _Point, q: _Point) -> _Point:
    if p is None:
        return q
    if q is None:
        return p
    if p[0] == q[0] and (p[1] + q[1]) % _P == 0:
        return None
    if p == q:
        slope = (3 * p[0] * p[0] + _A) * pow(2 * p[1], -1, _P) % _P
    else:
        slope = (q[1] - p[1]) * pow(q[0] - p[0], -1, _P) % _P
    x = (slope * slope - p[0] - q[0]) % _P
    return x, (slope * (p[0] - x) - p[1]) % _P


def _multiply(k: int, point: _Point) -> _Point:
    result: _Point = None
    addend = point
    while k:
        if k & 1:
            result = _add(result, addend)
        addend = _add(addend, addend)
        k >>= 1
    return result


# --- DER -----------------------------------------------------------------------------------------


def _tlv(tag: int, content: bytes) -> bytes:
    length = len(content)
    if length < 0x80:
        return bytes([tag, length]) + content
    encoded = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(encoded)]) + encoded + content


def _int(value: int) -> bytes:
    raw = value.to_bytes(max(1, (value.bit_length() + 8) // 8), "big")
    return _tlv(0x02, raw)


def _oid(dotted: str) -> bytes:
    arcs = [int(a) for a in dotted.split(".")]
    body = bytearray([40 * arcs[0] + arcs[1]])
    for arc in arcs[2:]:
        chunk = [arc & 0x7F]
        rest = arc >> 7
        while rest:
            chunk.append(0x80 | (rest & 0x7F))
            rest >>= 7
        body.extend(reversed(chunk))
    return _tlv(0x06, bytes(body))


def _seq(*parts: bytes) -> bytes:
    return _tlv(0x30, b"".join(parts))


def _bits(content: bytes, unused: int = 0) -> bytes:
    return _tlv(0x03, bytes([unused]) + content)


def _time(moment: datetime) -> bytes:
    if moment.year < 2050:
        return _tlv(0x17, moment.strftime("%y%m%d%H%M%SZ").encode())
    return _tlv(0x18, moment.strftime("%Y%m%d%H%M%SZ").encode())


_ECDSA_SHA256 = _seq(_oid("1.2.840.10045.4.3.2"))


def _name(common_name: str) -> bytes:
    return _seq(_tlv(0x31, _seq(_oid("2.5.4.3"), _tlv(0x0C, common_name.encode()))))


def _extension(oid: str, value: bytes, *, critical: bool = False) -> bytes:
    flag = _tlv(0x01, b"\xff") if critical else b""
    return _seq(_oid(oid), flag, _tlv(0x04, value))


def _pem(label: str, der: bytes) -> str:
    body = base64.b64encode(der).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n"


@dataclass(frozen=True)
class SelfSignedCertificate:
    cert_pem: str
    key_pem: str

    def write(self, directory: Path) -> tuple[Path, Path]:
        directory.mkdir(parents=True, exist_ok=True)
        cert, key = directory / "tls.crt", directory / "tls.key"
        cert.write_text(self.cert_pem)
        key.touch(mode=0o600)
        key.write_text(self.key_pem)
        return cert, key


def self_signed(
    *, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"), days: int = 3650
) -> SelfSignedCertificate:
    secret = secrets.randbelow(_N - 1) + 1
    public = _multiply(secret, _G)
    assert public is not None
    point = b"\x04" + public[0].to_bytes(32, "big") + public[1].to_bytes(32, "big")
    names = []
    for host in hosts:
        try:
            names.append(_tlv(0x87, ipaddress.ip_address(host).packed))
        except ValueError:
            names.append(_tlv(0x82, host.encode()))
    now = datetime.now(UTC).replace(microsecond=0)
    extensions = _tlv(
        0xA3,
        _seq(
            _extension("2.5.29.19", _seq(_tlv(0x01, b"\xff")), critical=True),  # basicConstraints: CA
            _extension("2.5.29.15", _bits(b"\x84", unused=2), critical=True),  # digitalSignature, keyCertSign
            _extension("2.5.29.17", _seq(*names)),  # subjectAltName
        ),
    )
    tbs = _seq(
        _tlv(0xA0, _int(2)),
        _int(secrets.randbits(63) | 1),
        _ECDSA_SHA256,
        _name("kubeemu"),
        _seq(_time(now - timedelta(hours=1)), _time(now + timedelta(days=days))),
        _name("kubeemu"),
        _seq(_seq(_oid("1.2.840.10045.2.1"), _oid("1.2.840.10045.3.1.7")), _bits(point)),
        extensions,
    )
    digest = int.from_bytes(hashlib.sha256(tbs).digest(), "big")
    while True:
        nonce = secrets.randbelow(_N - 1) + 1
        r_point = _multiply(nonce, _G)
        assert r_point is not None
        r = r_point[0] % _N
        s = pow(nonce, -1, _N) * (digest + r * secret) % _N
        if r and s:
            break
    certificate = _seq(tbs, _ECDSA_SHA256, _bits(_seq(_int(r), _int(s))))
    key = _seq(
        _int(1),
        _tlv(0x04, secret.to_bytes(32, "big")),
        _tlv(0xA0, _oid("1.2.840.10045.3.1.7")),
        _tlv(0xA1, _bits(point)),
    )
    return SelfSignedCertificate(
        cert_pem=_pem("CERTIFICATE", certificate), key_pem=_pem("EC PRIVATE KEY", key)
    )
