"""A test CA and a listener certificate it signed, as files: what the module CA and the api's
internal certificate are in a cluster (D159), for the listeners of tests and the local stack."""

from __future__ import annotations

from pathlib import Path

from support.scenarios import generated_certificate

LOCAL_HOSTS = ("127.0.0.1", "localhost")


def write_tls_files(directory: Path, *, hosts: tuple[str, ...] = LOCAL_HOSTS) -> tuple[Path, Path, Path]:
    """Certificate, key and CA files for a listener on `hosts` (a CA and a certificate it signed)."""
    pair = generated_certificate(hosts)
    directory.mkdir(parents=True, exist_ok=True)
    files = (directory / "tls.crt", directory / "tls.key", directory / "ca.crt")
    for path, pem in zip(files, (pair.cert_pem, pair.key_pem, pair.ca_pem), strict=True):
        path.write_text(pem)
    return files


def foreign_ca(directory: Path) -> Path:
    """A CA file of another CA than `write_tls_files`' (it signed nothing the tests serve)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "foreign-ca.crt"
    path.write_text(generated_certificate(("foreign.invalid",)).ca_pem)
    return path
