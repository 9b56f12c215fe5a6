"""A real S3 emulator process for tests: the pinned moto's `moto_server` on 127.0.0.1.

Fixtures (import them into a conftest.py; `tests/` is on pytest's python path):

    from fakes.s3 import moto_s3, s3_bucket

    __all__ = ["moto_s3", "s3_bucket"]  # re-exported fixtures, not unused imports

- `moto_s3` (session scope): a running `MotoS3` on an ephemeral port, stopped at teardown.
- `s3_bucket`: an empty bucket with a fresh name (`S3Bucket`); the whole server is wiped after
  the test, so objects never pile up in the server's memory across a session.

`isolate_aws_environment(monkeypatch)` points boto3's default credential chain at the dummy
keys only (no ~/.aws, no instance metadata), for in-process code that builds its own session,
such as `open_store`.

Outside those, `start_moto_server(workdir, enforce_auth=..., tls=...)` is a context manager for a
one-off server: `enforce_auth=True` makes moto check credentials (any key is unknown to it, so
every S3 call is refused with 403 InvalidAccessKeyId); `tls=True` serves HTTPS with a fresh CA
in `MotoS3.ca_file`.

The server accepts the dummy credentials below. `S3Bucket.process_env()` is the environment an
`ai-models` process needs to use the bucket (AI_MODELS_STORE_URL, AI_MODELS_S3_*, AWS_*).

Gotchas of moto 5.2.5 worth knowing: a presigned PUT sent with `Content-Type:
application/x-www-form-urlencoded` (urllib's default when `data=` is given) stores an empty object,
so send `application/octet-stream`; a non-us-east-1 client must pass a LocationConstraint to
`create_bucket`; bucket names need 3-63 characters.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import ipaddress
import os
import re
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped,unused-ignore]  # boto3 has no type hints
import pytest
from botocore.config import Config  # type: ignore[import-untyped,unused-ignore]  # botocore has none
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from support.eventually import eventually

MOTO_SERVER = Path(sys.executable).parent / "moto_server"
ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"

_LISTENING = re.compile(r"Running on (https?://127\.0\.0\.1:\d+)")


@dataclasses.dataclass
class MotoS3:
    """One running moto server."""

    endpoint_url: str
    log_path: Path
    ca_file: Path | None = None
    # A session loads botocore's service models once (a few hundred ms); tests share one.
    _sessions: dict[tuple[str, str], Any] = dataclasses.field(default_factory=dict, repr=False)

    def session(self, *, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY) -> Any:
        """A boto3 Session with explicit credentials, immune to the developer's ~/.aws and AWS_*.

        Sessions are shared per credentials; create clients from them in one thread at a time.
        """
        if (access_key, secret_key) not in self._sessions:
            self._sessions[access_key, secret_key] = boto3.session.Session(
                aws_access_key_id=access_key, aws_secret_access_key=secret_key, region_name=REGION
            )
        return self._sessions[access_key, secret_key]

    def client(self, *, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY) -> Any:
        """A boto3 S3 client for this server (path-style addressing: 127.0.0.1 has no bucket hosts)."""
        return self.session(access_key=access_key, secret_key=secret_key).client(
            "s3",
            endpoint_url=self.endpoint_url,
            verify=str(self.ca_file) if self.ca_file else True,
            config=Config(s3={"addressing_style": "path"}),
        )

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def reset(self) -> None:
        """Wipe every bucket and object (moto's `POST /moto-api/reset`)."""
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=10, context=self._ssl_context()) as response:
            response.read()

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"{self.endpoint_url}/moto-api/", timeout=2, context=self._ssl_context()
            ) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def _ssl_context(self) -> ssl.SSLContext | None:
        if not self.endpoint_url.startswith("https:"):
            return None
        return ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)


@dataclasses.dataclass(frozen=True)
class S3Bucket:
    """An existing bucket on a running server."""

    name: str
    server: MotoS3

    @property
    def url(self) -> str:
        return f"s3://{self.name}"

    def process_env(self) -> dict[str, str]:
        """Environment for an `ai-models` process (or any boto3 user) to reach this bucket."""
        env = {
            "AI_MODELS_STORE_URL": self.url,
            "AI_MODELS_S3_ENDPOINT": self.server.endpoint_url,
            "AI_MODELS_S3_REGION": REGION,
            "AI_MODELS_S3_USE_PATH_STYLE": "true",
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        }
        if self.server.ca_file:
            env["AI_MODELS_S3_CA_FILE"] = str(self.server.ca_file)
        return env


def isolate_aws_environment(
    monkeypatch: pytest.MonkeyPatch,
    *,
    access_key: str | None = ACCESS_KEY,
    secret_key: str | None = SECRET_KEY,
) -> None:
    """Leave boto3's default credential chain only these keys (None: no credentials at all).

    The developer's ~/.aws files, profiles and instance-metadata lookups are cut off, so a test
    of code that builds its own boto3 session behaves the same on every machine.
    """
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    if access_key is not None:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", access_key)
    if secret_key is not None:
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret_key)


def fresh_bucket_name() -> str:
    return f"test-{uuid.uuid4().hex[:16]}"


@contextlib.contextmanager
def start_moto_server(
    workdir: Path, *, enforce_auth: bool = False, tls: bool = False, timeout: float = 30
) -> Iterator[MotoS3]:
    """Run `moto_server` until the block ends; its log (every request) goes to `workdir`."""
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / f"moto-{uuid.uuid4().hex[:8]}.log"
    command = [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", "0"]
    ca_file = None
    if tls:
        ca_file, key_file = write_self_signed_certificate(workdir)
        command += ["-c", str(ca_file), "-k", str(key_file)]
    env = {name: value for name, value in os.environ.items() if name != "INITIAL_NO_AUTH_ACTION_COUNT"}
    if enforce_auth:
        # moto lets this many requests through unauthenticated before it starts checking keys.
        env["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"
    # The log is a file, not a pipe: moto logs every request, and a pipe nobody drains would
    # eventually block the server.
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        server = _wait_until_listening(process, log_path=log_path, ca_file=ca_file, timeout=timeout)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _wait_until_listening(
    process: subprocess.Popen[bytes], *, log_path: Path, ca_file: Path | None, timeout: float
) -> MotoS3:
    found: list[MotoS3] = []

    def answering() -> MotoS3 | None:
        if process.poll() is not None:
            raise RuntimeError(
                f"moto_server exited with {process.poll()}; log {log_path}:\n"
                f"{log_path.read_text(errors='replace')[-4000:]}"
            )
        if not found:
            # Port 0 lets the kernel pick a free port; werkzeug prints the one it got.
            listening = _LISTENING.search(log_path.read_text(errors="replace"))
            if listening:
                found.append(MotoS3(endpoint_url=listening.group(1), log_path=log_path, ca_file=ca_file))
        return found[0] if found and found[0].answers() else None

    server = eventually(
        answering,
        timeout=timeout,
        interval=0.05,
        message=lambda: (
            f"moto_server to answer; log {log_path}:\n{log_path.read_text(errors='replace')[-4000:]}"
        ),
    )
    assert server is not None
    return server


def write_self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A CA certificate for 127.0.0.1 that is also the server's; returns (certificate, key) files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "moto test CA")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.IPv4Address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_file = directory / "moto-ca.pem"
    key_file = directory / "moto-key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


@pytest.fixture(scope="session")
def moto_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoS3]:
    """One moto server for the session."""
    with start_moto_server(tmp_path_factory.mktemp("moto-s3")) as server:
        yield server


@pytest.fixture
def s3_bucket(moto_s3: MotoS3) -> Iterator[S3Bucket]:
    """A fresh empty bucket; the server is reset after the test."""
    bucket = S3Bucket(name=fresh_bucket_name(), server=moto_s3)
    moto_s3.create_bucket(bucket.name)
    yield bucket
    moto_s3.reset()
