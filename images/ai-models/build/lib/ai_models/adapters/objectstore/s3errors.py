"""What an S3 failure means for an administrator: botocore errors turned into a cause and a hint.

Hints name the module settings (`artifacts.*` in the ModuleConfig) that feed the store, because
that is where an administrator fixes a wrong bucket, endpoint, region or credential.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import (  # type: ignore[import-untyped,unused-ignore]  # botocore has no type hints
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    CredentialRetrievalError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
    ReadTimeoutError,
    SSLError,
)

from ai_models.adapters.objectstore.base import ObjectStoreError, store_error

BUCKET_HINT = "check artifacts.bucket: the bucket must exist at artifacts.endpoint"
CREDENTIALS_HINT = (
    "check artifacts.credentialsSecretName: its accessKey/secretKey (AWS_ACCESS_KEY_ID/"
    "AWS_SECRET_ACCESS_KEY) must be valid at the endpoint and allowed to read, write and list the bucket"
)
REGION_HINT = "check artifacts.region: the bucket answers from another region"
ENDPOINT_HINT = "check artifacts.endpoint and that the network lets this pod reach it"
TLS_HINT = (
    "check artifacts.caSecretName (the CA that signed the endpoint's certificate); "
    "artifacts.insecure skips verification, for tests only"
)
SERVICE_HINT = "the S3 service failed the request; check its health and logs, and artifacts.endpoint"

_MISSING_KEY_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
_BUCKET_CODES = frozenset({"NoSuchBucket"})
_CREDENTIAL_CODES = frozenset(
    {
        "AccessDenied",
        "403",
        "Forbidden",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "AllAccessDisabled",
        "AccountProblem",
    }
)
_REGION_CODES = frozenset(
    {"PermanentRedirect", "301", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException"}
)
_NO_CREDENTIALS = (NoCredentialsError, PartialCredentialsError, CredentialRetrievalError)
_UNREACHABLE = (EndpointConnectionError, ConnectTimeoutError, ConnectionClosedError, ReadTimeoutError)


def error_code(exc: ClientError) -> str:
    response: dict[str, Any] = exc.response
    return str(response.get("Error", {}).get("Code", ""))


def is_missing_key(exc: Exception) -> bool:
    """NoSuchKey, or the bare 404 of a HEAD (which has no body to say more).

    NoSuchBucket is a 404 too, but it says so in its code and is a setup error, not a missing key.
    """
    return isinstance(exc, ClientError) and error_code(exc) in _MISSING_KEY_CODES


def hint_for_code(code: str, status: int | None = None) -> str:
    if code in _BUCKET_CODES or code in {"404", "NotFound"}:
        # A bare 404 reaches here only from bucket-level calls: key-level ones map it to ObjectNotFound.
        return BUCKET_HINT
    if code in _CREDENTIAL_CODES or status == 403:
        return CREDENTIALS_HINT
    if code in _REGION_CODES or status == 301:
        return REGION_HINT
    return SERVICE_HINT


def translate(exc: Exception, *, store: str, action: str, key: str | None) -> ObjectStoreError:
    cause, hint = _describe(exc)
    return store_error(store=store, action=action, key=key, cause=cause, hint=hint)


def _describe(exc: Exception) -> tuple[str, str]:
    if isinstance(exc, ClientError):
        code = error_code(exc)
        response: dict[str, Any] = exc.response
        message = str(response.get("Error", {}).get("Message") or "")
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        # A HEAD error has no body: botocore makes the status its code and the reason its message.
        if not message or message == code:
            cause = code
        elif code.isdigit():
            cause = message
        else:
            cause = f"{code}: {message}"
        if status is not None:
            cause += f" (HTTP {status})"
        return cause, hint_for_code(code, status)
    cause = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, _NO_CREDENTIALS):
        return cause, CREDENTIALS_HINT
    # SSLError is a connection error too; it comes first because its fix is different.
    if isinstance(exc, SSLError):
        return cause, TLS_HINT
    if isinstance(exc, _UNREACHABLE):
        return cause, ENDPOINT_HINT
    return cause, SERVICE_HINT
