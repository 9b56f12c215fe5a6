"""`ai-models materialize`: each artifact a workload uses, from the serving API onto its claim.

What to deliver is the controller's `MaterializationRequest` (`domain.delivery.materialization`),
read with the delivery token from the environment; every artifact goes through `tree.ArtifactCopy`
(skipped when the claim has it complete). The outcome goes to the Pod's termination message, on
success and on failure. Exit codes: 0 every artifact delivered, 1 failed with an outcome written,
2 bad settings. The token is never logged and never part of an outcome.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from ai_models.adapters.serving.client import ServingClient
from ai_models.adapters.serving.tree import (
    BUFFER_BYTES,
    ArtifactCopy,
    Delivered,
    MaterializationFailure,
    Retry,
    Tally,
)
from ai_models.domain.delivery.materialization import (
    MaterializationOutcome,
    MaterializationRequest,
    MaterializationRequestError,
    ca_bundle_value,
    delivery_token_value,
)
from ai_models.domain.publication.request import DEFAULT_TERMINATION_MESSAGE_PATH
from ai_models.names import MaterializeVariable

logger = logging.getLogger(__name__)

EXIT_DELIVERED = 0
EXIT_FAILED = 1
EXIT_BAD_SETTINGS = 2


def main(env: Mapping[str, str] | None = None, *, retry: Retry | None = None) -> int:
    """Read the request from the environment and materialize it; the exit code."""
    env = os.environ if env is None else env
    try:
        request = MaterializationRequest.from_env(env)
    except MaterializationRequestError as error:
        return _bad_settings(env, [f"invalid setting {problem}" for problem in error.problems])
    token = delivery_token_value(env)
    ca_pem = ca_bundle_value(env)
    # from_env requires both.
    assert token is not None
    assert ca_pem is not None
    try:
        client = ServingClient(base_url=request.api_url, token=token, ca_pem=ca_pem)
    except (ValueError, OSError) as error:
        # A certificate that does not load; a token never appears in these messages.
        return _bad_settings(
            env,
            [
                f"cannot use the serving API {request.api_url} with the module CA certificate of "
                f"{MaterializeVariable.CA_BUNDLE.value}: {error}"
            ],
        )
    try:
        return materialize(request, client=client, retry=retry or Retry())
    finally:
        client.close()


def materialize(request: MaterializationRequest, *, client: ServingClient, retry: Retry) -> int:
    root = Path(request.target_dir)
    termination = Path(request.termination_message_path)
    tally = Tally()
    buffer = bytearray(BUFFER_BYTES)
    delivered: list[Delivered] = []
    started = time.monotonic()
    logger.info(
        "materialization started",
        extra={
            "artifacts": [item.digest for item in request.artifacts],
            "api": client.where,
            "target": str(root),
        },
    )
    try:
        if not root.is_dir():
            raise MaterializationFailure(
                f"the claim is not mounted at {root} (no such directory): the Job's volume is missing",
                retryable=True,
            )
        for artifact in request.artifacts:
            copy = ArtifactCopy(
                client=client, root=root, artifact=artifact, buffer=buffer, tally=tally, retry=retry
            )
            delivered.append(copy.run())
    except MaterializationFailure as failure:
        logger.error(
            "materialization failed",
            extra={"error": failure.message, "retryable": failure.retryable, "bytes_fetched": tally.fetched},
        )
        _write_outcome(
            termination,
            MaterializationOutcome(
                succeeded=False,
                message=failure.message,
                delivered=tuple(item.digest for item in delivered),
                retryable=failure.retryable,
            ),
        )
        return EXIT_FAILED
    except Exception as error:
        # A bug or an error nobody foresaw: say so, and let the controller's bounded retries decide.
        logger.exception("materialization failed unexpectedly")
        _write_outcome(
            termination,
            MaterializationOutcome(
                succeeded=False,
                message=f"the materializer failed unexpectedly ({type(error).__name__}); the Job's log has "
                "the details",
                delivered=tuple(item.digest for item in delivered),
                retryable=True,
            ),
        )
        return EXIT_FAILED
    seconds = time.monotonic() - started
    size = sum(item.size_bytes for item in delivered)
    logger.info(
        "materialization finished",
        extra={
            "artifacts": len(delivered),
            "skipped": sum(1 for item in delivered if item.skipped),
            "bytes": size,
            "bytes_fetched": tally.fetched,
            "bytes_reused": tally.reused,
            "seconds": round(seconds, 3),
            "mib_per_second": round(tally.fetched / (1024 * 1024) / seconds, 1) if seconds > 0 else None,
        },
    )
    _write_outcome(
        termination,
        MaterializationOutcome(
            succeeded=True,
            message=f"delivered {len(delivered)} artifacts, {size} bytes ({tally.fetched} fetched now)",
            delivered=tuple(item.digest for item in delivered),
        ),
    )
    return EXIT_DELIVERED


def _bad_settings(env: Mapping[str, str], problems: list[str]) -> int:
    for line in problems:
        logger.error(line)
        print(f"ai-models materialize: {line}", file=sys.stderr, flush=True)
    # The controller reads the termination message; without one it would just retry the Job.
    path = env.get(MaterializeVariable.TERMINATION_MESSAGE_PATH.value) or DEFAULT_TERMINATION_MESSAGE_PATH
    _write_outcome(
        Path(path),
        MaterializationOutcome(
            succeeded=False,
            message="the materialize Job was started with invalid settings (a controller bug): "
            + "; ".join(problems),
        ),
    )
    return EXIT_BAD_SETTINGS


def _write_outcome(path: Path, outcome: MaterializationOutcome) -> None:
    try:
        path.write_text(outcome.to_json())
    except OSError as error:
        logger.error("cannot write the termination message", extra={"path": str(path), "error": str(error)})
