"""A Model whose module Hugging Face endpoint is hostile: what reaches the Model's status and Events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.model_stack import ModelStack, model_stack
from fakes.hostile_hub import HostileHub
from fakes.hub import FakeHub
from fakes.hub_corpus import FakeModel
from fakes.s3 import S3Bucket
from kubeemu.pytest_fixtures import RunningEmulator

SECRET = "hf_FAKESECRETdoNotReflect0123456789"


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    return []


@pytest.fixture
def stack(
    kube_emulator: RunningEmulator, fake_hub: FakeHub, s3_bucket: S3Bucket, tmp_path: Path
) -> Iterator[ModelStack]:
    yield from model_stack(kube_emulator, fake_hub, s3_bucket, tmp_path)


@pytest.fixture
def hostile() -> Iterator[HostileHub]:
    with HostileHub() as hub:
        yield hub


def readable(stack: ModelStack, name: str) -> str:
    """The Model as a User of its namespace reads it, and every Event's message."""
    events = stack.core.list_event_for_all_namespaces()
    return json.dumps(stack.model(name)) + "\n".join(str(event.message) for event in events.items)


def ready_message(stack: ModelStack, name: str) -> str:
    message: Any = stack.condition(name, "Ready").get("message") or ""
    return str(message)


def test_the_hubs_error_body_never_reaches_the_models_status(stack: ModelStack, hostile: HostileHub) -> None:
    hostile.reject_with(
        400,
        body=f'{{"error": "bad request from token {SECRET}"}}'.encode(),
        headers={"X-Error-Message": f"token {SECRET}", "X-Error-Code": "BadRequest"},
    )
    stack.controller(AI_MODELS_HF_ENDPOINT=hostile.url)
    stack.create_model("reflected", {"url": "https://huggingface.co/acme/tiny-llama"})

    stack.eventually(lambda: "HTTP 400" in ready_message(stack, "reflected"), what="the refusal in status")

    assert hostile.count() >= 1
    assert SECRET not in readable(stack, "reflected")
    assert "provider code BadRequest" in ready_message(stack, "reflected")


def test_a_redirect_of_the_model_description_to_another_port_is_not_followed(
    stack: ModelStack, hostile: HostileHub
) -> None:
    with HostileHub() as sink:
        hostile.redirect_to(f"{sink.url}/api/models/acme/tiny-llama/revision/main")
        stack.controller(AI_MODELS_HF_ENDPOINT=hostile.url)
        stack.create_model("redirected", {"url": "https://huggingface.co/acme/tiny-llama"})

        stack.eventually(
            lambda: "redirected to another host" in ready_message(stack, "redirected"),
            what="the refused redirect in status",
        )

        assert sink.count() == 0
