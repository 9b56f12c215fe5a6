"""`ai-models publish` through the real console entry point, configured as the controller's Job is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ai_models.adapters.objectstore import DirectoryStore
from ai_models.controller.models.jobs import publication_env, token_env
from ai_models.domain.artifacts.layout import manifest_key
from ai_models.domain.artifacts.sniff import PayloadFormat
from ai_models.domain.publication.request import FileSpec, HuggingFacePublication
from ai_models.names import PublishVariable
from ai_models.publish.main import EXIT_BAD_SETTINGS, EXIT_FAILED, EXIT_PUBLISHED
from fakes.hub import FakeHub, repository
from fakes.model_files import tiny_gguf

if TYPE_CHECKING:
    from publish.conftest import Kit, Plan

ENTRY_POINT = Path(sys.executable).parent / "ai-models"
REPO = "acme/tiny-llama"


def job_env(kit: Kit, job: Plan, hub: FakeHub) -> dict[str, str]:
    owner = kit.owner
    return {
        "AI_MODELS_PUBLISH_OWNER_KIND": owner.kind,
        "AI_MODELS_PUBLISH_OWNER_NAMESPACE": owner.namespace,
        "AI_MODELS_PUBLISH_OWNER_NAME": owner.name,
        "AI_MODELS_PUBLISH_OWNER_UID": owner.uid,
        "AI_MODELS_PUBLISH_DIGEST": job.digest,
        "AI_MODELS_PUBLISH_SOURCE_TYPE": "HuggingFace",
        "AI_MODELS_PUBLISH_REPOSITORY": job.repository,
        "AI_MODELS_PUBLISH_REVISION": job.revision,
        "AI_MODELS_PUBLISH_ENDPOINT": hub.url,
        "AI_MODELS_PUBLISH_FILES": json.dumps(job.files, separators=(",", ":")),
        "AI_MODELS_PUBLISH_TERMINATION_MESSAGE_PATH": str(kit.tmp_path / "termination-log"),
        "AI_MODELS_PUBLISH_REPORT_PROGRESS": "false",
        "AI_MODELS_STORE_URL": f"file://{kit.store.root}",
    }


def publish(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    inherited = {key: value for key, value in os.environ.items() if not key.startswith(("AI_MODELS_", "HF_"))}
    return subprocess.run(
        [str(ENTRY_POINT), "publish"],
        env={**inherited, "AI_MODELS_LOG_FORMAT": "json", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def log_lines(result: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    lines = []
    for line in result.stderr.splitlines():
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def termination(kit: Kit) -> dict[str, object]:
    document: dict[str, object] = json.loads((kit.tmp_path / "termination-log").read_text())
    return document


def test_a_publication_exits_0_with_the_outcome_and_structured_logs(kit: Kit, hub: FakeHub) -> None:
    hub.add(repository(REPO, kit.model_files()))
    job = kit.plan(hub, REPO)

    result = publish(job_env(kit, job, hub))

    assert result.returncode == EXIT_PUBLISHED, result.stderr
    assert termination(kit)["reason"] == "ArtifactPublished"
    assert termination(kit)["digest"] == job.digest
    assert DirectoryStore(kit.store.root).head(manifest_key(kit.owner, job.digest)) is not None
    logs = log_lines(result)
    stored = [line for line in logs if line["msg"] == "file stored"]
    assert sorted(str(line["file"]) for line in stored) == sorted(item["path"] for item in job.files)
    assert all(line["logger"] == "ai_models.publish.artifact" for line in stored)
    summary = [line for line in logs if line["msg"] == "publication finished"]
    assert summary
    assert summary[0]["model"] == kit.owner.name
    assert summary[0]["namespace"] == kit.owner.namespace


def test_a_failed_publication_exits_1_with_the_reason(kit: Kit, hub: FakeHub) -> None:
    hub.add(repository(REPO, kit.model_files()))
    job = kit.plan(hub, REPO)
    hub.remove(REPO)

    result = publish(job_env(kit, job, hub))

    assert result.returncode == EXIT_FAILED, result.stderr
    assert termination(kit)["reason"] == "SourceNotFound"
    assert termination(kit)["retryable"] is False
    assert any(line["msg"] == "publication failed" for line in log_lines(result))


def test_an_upload_publication_through_the_cli(kit: Kit) -> None:
    digest = kit.stage_upload(tiny_gguf(), payload_format=PayloadFormat.GGUF, filename="tiny.gguf")
    owner = kit.owner
    env = {
        "AI_MODELS_PUBLISH_OWNER_KIND": owner.kind,
        "AI_MODELS_PUBLISH_OWNER_NAMESPACE": owner.namespace,
        "AI_MODELS_PUBLISH_OWNER_NAME": owner.name,
        "AI_MODELS_PUBLISH_OWNER_UID": owner.uid,
        "AI_MODELS_PUBLISH_DIGEST": digest,
        "AI_MODELS_PUBLISH_SOURCE_TYPE": "Upload",
        "AI_MODELS_PUBLISH_TERMINATION_MESSAGE_PATH": str(kit.tmp_path / "termination-log"),
        "AI_MODELS_PUBLISH_REPORT_PROGRESS": "false",
        "AI_MODELS_STORE_URL": str(kit.store.root),
    }

    result = publish(env)

    assert result.returncode == EXIT_PUBLISHED, result.stderr
    assert [item.path for item in kit.manifest(digest).files] == ["tiny.gguf"]


def test_bad_settings_exit_2_naming_the_variable(kit: Kit, hub: FakeHub) -> None:
    hub.add(repository(REPO, kit.model_files()))
    job = kit.plan(hub, REPO)
    env = job_env(kit, job, hub)
    env["AI_MODELS_PUBLISH_DIGEST"] = "md5:abc"
    del env["AI_MODELS_PUBLISH_OWNER_UID"]

    result = publish(env)

    assert result.returncode == EXIT_BAD_SETTINGS
    assert "AI_MODELS_PUBLISH_DIGEST" in result.stderr
    assert "AI_MODELS_PUBLISH_OWNER_UID" in result.stderr
    # The controller learns why from the termination message, too.
    assert termination(kit)["reason"] == "PublicationFailed"
    assert "AI_MODELS_PUBLISH_DIGEST" in str(termination(kit)["message"])
    assert hub.count("resolve") == 0


def test_inconsistent_settings_exit_2(kit: Kit, hub: FakeHub) -> None:
    hub.add(repository(REPO, kit.model_files()))
    job = kit.plan(hub, REPO)
    env = job_env(kit, job, hub)
    env["AI_MODELS_PUBLISH_OWNER_NAMESPACE"] = ""  # a Model lives in a namespace
    env["AI_MODELS_PUBLISH_FILES"] = '[{"path": "../escape", "size": 1}]'

    result = publish(env)

    assert result.returncode == EXIT_BAD_SETTINGS
    assert "AI_MODELS_PUBLISH_FILES" in result.stderr
    assert "'../escape' is not a relative" in result.stderr


def test_a_store_url_that_is_not_one_exits_2(kit: Kit, hub: FakeHub) -> None:
    hub.add(repository(REPO, kit.model_files()))
    job = kit.plan(hub, REPO)
    env = job_env(kit, job, hub)
    env["AI_MODELS_STORE_URL"] = "ftp://nowhere"

    result = publish(env)

    assert result.returncode == EXIT_BAD_SETTINGS
    assert "AI_MODELS_STORE_URL" in str(termination(kit)["message"])


def test_the_job_env_the_controller_writes_is_published_by_the_cli(kit: Kit, hub: FakeHub) -> None:
    hub.add(repository(REPO, kit.model_files(), private_token="hf_secret"))
    job = kit.plan(hub, REPO, token="hf_secret")
    source = HuggingFacePublication(
        repository=job.repository,
        revision=job.revision,
        files=tuple(FileSpec.model_validate(item) for item in job.files),
        endpoint=hub.url,
    )
    written = [*publication_env(kit.owner, digest=job.digest, source=source), token_env(kit.owner)]
    # What the kubelet gives the container: plain values, the token from the Job's token Secret.
    secrets = {(f"publish-{kit.owner.uid}-token", "token"): "hf_secret"}
    env = {}
    for item in written:
        if "valueFrom" in item:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = secrets[ref["name"], ref["key"]]
        else:
            env[item["name"]] = item["value"]

    result = publish(
        {
            **env,
            PublishVariable.TERMINATION_MESSAGE_PATH.value: str(kit.tmp_path / "termination-log"),
            PublishVariable.REPORT_PROGRESS.value: "false",
            "AI_MODELS_STORE_URL": f"file://{kit.store.root}",
        }
    )

    assert result.returncode == EXIT_PUBLISHED, result.stderr
    assert termination(kit)["digest"] == job.digest
    assert {request.headers.get("authorization") for request in hub.requests("resolve")} == {
        "Bearer hf_secret"
    }


def test_a_garbled_files_list_exits_2_naming_the_variable(kit: Kit, hub: FakeHub) -> None:
    hub.add(repository(REPO, kit.model_files()))
    env = job_env(kit, kit.plan(hub, REPO), hub)
    env["AI_MODELS_PUBLISH_FILES"] = '[{"path": "config.json", "size": "many"}'

    result = publish(env)

    assert result.returncode == EXIT_BAD_SETTINGS
    assert "AI_MODELS_PUBLISH_FILES is not a JSON list of files" in result.stderr
    assert "AI_MODELS_PUBLISH_FILES" in str(termination(kit)["message"])
    assert hub.count("resolve") == 0


def test_the_help_lists_publish() -> None:
    result = subprocess.run(
        [str(ENTRY_POINT), "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0
    assert "publish" in result.stdout
