"""The upload signing key and the check of upload tokens against it.

The key is `data.key` of the Secret `ai-models-upload-signing` in the module namespace, which the
controller creates and may rotate (the delivery signing key, `ai-models-delivery-signing`, is read
by the same class, `secret=`, and checked by `serving.delivery_tokens`). It is read through the
Kubernetes API and kept for `ttl_seconds`; a token that fails to verify makes the key be read again
at once (a rotated key then works on the first request), but at most once per
`min_refresh_seconds`, so a stream of forged tokens cannot turn into a stream of Secret reads.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from ai_models.adapters.kube.objects import Objects
from ai_models.adapters.kube.resources import SECRETS
from ai_models.api.kube_calls import KubeCalls
from ai_models.api.models import ProblemType
from ai_models.api.problems import UPLOAD_TOKEN_CHALLENGE, ApiProblem
from ai_models.domain.publication.upload_token import UploadGrant, UploadTokenRejected, verify
from ai_models.names import UPLOAD_SIGNING_KEY, UPLOAD_SIGNING_SECRET

log = logging.getLogger(__name__)

DEFAULT_TTL_SECONDS: Final = 30.0
DEFAULT_MIN_REFRESH_SECONDS: Final = 1.0
# A signature that verifies at the start of time is genuine: the token was refused for its expiry.
_BEGINNING: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def token_invalid(detail: str) -> ApiProblem:
    return ApiProblem(
        ProblemType.UPLOAD_TOKEN_INVALID, 401, detail, headers={"WWW-Authenticate": UPLOAD_TOKEN_CHALLENGE}
    )


def token_expired(detail: str) -> ApiProblem:
    return ApiProblem(ProblemType.UPLOAD_TOKEN_EXPIRED, 403, detail)


class SigningKeys:
    def __init__(
        self,
        *,
        api_client: Any,
        namespace: str,
        calls: KubeCalls,
        request_timeout: tuple[float, float],
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        min_refresh_seconds: float = DEFAULT_MIN_REFRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        secret: str = UPLOAD_SIGNING_SECRET,
        refused: str = "uploads are refused",
        call: str = "GetUploadSigningKey",
    ) -> None:
        self._secrets = Objects(api_client, SECRETS, timeout=request_timeout)
        self._namespace = namespace
        self._secret = secret
        self._refused = refused
        self._call = call
        self._calls = calls
        self._ttl = ttl_seconds
        self._min_refresh = min_refresh_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._key: bytes | None = None
        self._read_at: float | None = None

    @property
    def where(self) -> str:
        return f"Secret {self._namespace}/{self._secret}"

    def current(self) -> bytes | None:
        """The key as read within the cache TTL (None: no usable key)."""
        return self._current(refresh_after=self._ttl)

    def refreshed(self) -> bytes | None:
        """The key read again, unless it was read within `min_refresh_seconds` (a token that did not
        verify may have been signed with a rotated key)."""
        return self._current(refresh_after=self._min_refresh)

    def verify(self, token: str, *, now: datetime.datetime) -> UploadGrant:
        """The grant the token carries; raises ApiProblem 401 (not genuine), 403 (expired), 502/503."""
        key = self._current(refresh_after=self._ttl)
        try:
            return self._verify(token, key, now)
        except ApiProblem as problem:
            if problem.kind is not ProblemType.UPLOAD_TOKEN_INVALID:
                raise
            fresh = self._current(refresh_after=self._min_refresh)
            if fresh == key:
                raise
        return self._verify(token, fresh, now)

    def _verify(self, token: str, key: bytes | None, now: datetime.datetime) -> UploadGrant:
        if key is None:
            raise token_invalid(
                f"no upload URL is valid now: the signing key ({self.where}, key {UPLOAD_SIGNING_KEY!r}) "
                "does not exist; the controller creates it and issues new URLs in status.upload"
            )
        try:
            return verify(token, key=key, now=now)
        except UploadTokenRejected as rejected:
            try:
                verify(token, key=key, now=_BEGINNING)
            except UploadTokenRejected:
                raise token_invalid(str(rejected)) from None
            raise token_expired(str(rejected)) from None

    def _current(self, *, refresh_after: float) -> bytes | None:
        with self._lock:
            if self._read_at is None or self._clock() - self._read_at >= refresh_after:
                self._key = self._read()
                self._read_at = self._clock()
            return self._key

    def _read(self) -> bytes | None:
        # Objects.get answers None for a missing Secret, so no 404 reaches KubeCalls.
        secret = self._calls.call(
            self._call,
            lambda: self._secrets.get(self._secret, self._namespace),
            needs=f"get on secrets {self._secret} in {self._namespace}",
        )
        if secret is None:
            log.warning(f"the signing key does not exist; {self._refused}", extra={"secret": self.where})
            return None
        encoded = (secret.get("data") or {}).get(UPLOAD_SIGNING_KEY)
        try:
            key = base64.b64decode(encoded or "", validate=True)
        except (binascii.Error, ValueError):
            key = b""
        if not key:
            log.warning(
                f"the signing key is empty or not base64; {self._refused}", extra={"secret": self.where}
            )
            return None
        return key
