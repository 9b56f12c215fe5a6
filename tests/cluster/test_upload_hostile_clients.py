"""Hostile upload clients against real api processes (and the real controller issuing the URLs):
tricklers are cut off below the minimum rate and give back their reservation and slot, a client
that disconnects leaves nothing behind, and two api replicas never both accept an upload for one
Model (D41, D42)."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.model_stack import ModelStack, model_stack
from fakes.hub import FakeHub
from fakes.model_files import MIB, safetensors_bytes
from fakes.s3 import S3Bucket
from fakes.upload_clients import RawUpload, Trickler
from kubeemu.pytest_fixtures import RunningEmulator

WEIGHTS = safetensors_bytes({"model.embed_tokens.weight": ("BF16", (256, 64))})
LARGER = safetensors_bytes({"model.embed_tokens.weight": ("BF16", (1024, 1024))})  # 2 MiB
# 64 KiB/s averaged over 1 s windows: a byte every 0.2 s is far below it.
PACE = {
    "AI_MODELS_API_UPLOAD_MIN_BYTES_PER_SECOND": str(64 * 1024),
    "AI_MODELS_API_UPLOAD_RATE_WINDOW_SECONDS": "1",
}


@pytest.fixture
def stack(
    kube_emulator: RunningEmulator, fake_hub: FakeHub, s3_bucket: S3Bucket, tmp_path: Path
) -> Iterator[ModelStack]:
    yield from model_stack(kube_emulator, fake_hub, s3_bucket, tmp_path, capacity_limit="64Mi")


def reserved(stack: ModelStack) -> list[str]:
    ledger = stack.ledger() or {"entries": []}
    return [entry["owner"]["name"] for entry in ledger["entries"] if entry["state"] == "Reserved"]


def waiting_for_upload(stack: ModelStack, *names: str) -> dict[str, str]:
    """Create upload Models; each one's in-cluster URL path (token included) once issued."""
    for name in names:
        stack.create_model(name, {"upload": {}})
    return {
        name: urllib.parse.urlsplit(stack.wait_phase(name, "WaitForUpload")["upload"]["inCluster"]).path
        for name in names
    }


def started(stack: ModelStack, **env: str) -> Any:
    stack.api(**env)
    stack.controller()
    stack.eventually(lambda: (stack.ledger() or {}).get("confirmed") is True, what="the inventory pass")
    return stack.uploader()


def test_a_trickle_holding_the_budget_is_cut_off_and_another_upload_goes_through(stack: ModelStack) -> None:
    uploader = started(stack, **PACE)
    paths = waiting_for_upload(stack, "trickling", "other", "dropped")
    auth = {"Authorization": f"Bearer {uploader.token}"}
    # It announces the whole budget and sends a byte every 0.2 s.
    trickler = Trickler(
        "127.0.0.1",
        stack.api_ports["api-0"],
        paths["trickling"],
        content_length=64 * MIB,
        head=WEIGHTS,
        headers=auth,
    ).start()
    try:
        stack.eventually(lambda: reserved(stack) == ["trickling"], what="the trickler's reservation")
        assert stack.upload("other", WEIGHTS) == 507  # while it holds the budget
        answer = trickler.answer()
        assert answer.status == 408, answer.raw
        assert b"below the minimum rate" in answer.raw
    finally:
        trickler.close()
    assert reserved(stack) == []
    assert stack.upload("other", WEIGHTS) == 201
    stack.wait_phase("other", "Ready")

    # A client that goes away mid-body leaves neither bytes nor a reservation.
    leaving = RawUpload(
        "127.0.0.1", stack.api_ports["api-0"], paths["dropped"], content_length=8 * MIB, headers=auth
    )
    try:
        assert leaving.send(WEIGHTS + bytes(MIB))
        stack.eventually(lambda: "dropped" in reserved(stack), what="the upload to start")
    finally:
        leaving.close()
    stack.eventually(
        lambda: (
            "dropped" not in reserved(stack) and not any("/dropped/" in key for key in stack.keys("uploads/"))
        ),
        what="the abandoned upload discarded",
    )
    assert stack.status("dropped")["phase"] == "WaitForUpload"


def test_five_tricklers_do_not_hold_every_upload_slot(stack: ModelStack) -> None:
    uploader = started(stack, AI_MODELS_API_MAX_CONCURRENT_UPLOADS="5", **PACE)
    names = [f"trickler-{number}" for number in range(5)]
    paths = waiting_for_upload(stack, *names, "sixth")
    auth = {"Authorization": f"Bearer {uploader.token}"}
    tricklers = [
        Trickler(
            "127.0.0.1",
            stack.api_ports["api-0"],
            paths[name],
            content_length=8 * MIB,
            head=WEIGHTS,
            headers=auth,
        ).start()
        for name in names
    ]
    try:
        # Each trickler takes a slot (its reservation appears) before it is cut off; on a loaded
        # machine the first may already be cut off when the last one starts, so each is looked for
        # over time rather than all five at one instant.
        seen: set[str] = set()

        def every_trickler_reserved() -> bool:
            seen.update(reserved(stack))
            return seen >= set(names)

        stack.eventually(
            every_trickler_reserved, what=lambda: f"five tricklers streaming (seen {sorted(seen)})"
        )
        # All five slots held: the sixth is told to come back (or, if a trickler was cut off
        # meanwhile, taken at once); never queued to be stored after its client gave up.
        assert stack.upload("sixth", WEIGHTS) in (503, 201)
        assert [trickler.answer().status for trickler in tricklers] == [408] * 5
    finally:
        for trickler in tricklers:
            trickler.close()
    if stack.status("sixth")["phase"] == "WaitForUpload":
        assert stack.upload("sixth", WEIGHTS) == 201
    stack.wait_phase("sixth", "Ready")
    assert reserved(stack) == []


def test_two_api_replicas_take_one_upload_for_one_model(stack: ModelStack) -> None:
    uploader = started(stack)
    second = stack.api("api-1")
    assert second.running()
    path = waiting_for_upload(stack, "raced")["raced"]
    auth = {"Authorization": f"Bearer {uploader.token}"}
    first = RawUpload("127.0.0.1", stack.api_ports["api-0"], path, content_length=len(LARGER), headers=auth)
    try:
        assert first.send(LARGER[: 64 * 1024])
        stack.eventually(
            lambda: any(key.endswith("/claim.json") for key in stack.keys("uploads/")),
            what="the first replica's claim",
        )
        url = f"http://127.0.0.1:{stack.api_ports['api-1']}{path}"
        assert stack.upload("raced", WEIGHTS, url=url) == 409
        assert first.send(LARGER[64 * 1024 :])
        assert first.answer().status == 201
    finally:
        first.close()
    status = stack.wait_phase("raced", "Ready")
    assert status["artifact"]["sizeBytes"] == len(LARGER)
