"""Publishing from a Hugging Face repository: the fake Hub over HTTP into a directory store."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import struct
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from publish.conftest import Kit

from ai_models.adapters.objectstore import DirectoryStore, ObjectStoreError
from ai_models.domain.artifacts.layout import artifact_prefix, manifest_key
from ai_models.domain.publication.outcome import outcome_from_json
from ai_models.names import ModelReason, SourceType
from ai_models.publish.main import EXIT_FAILED, EXIT_PUBLISHED
from fakes.hub import FakeHub, repository
from fakes.model_files import MIB, content_sha256, synthetic_safetensors, tiny_gguf

REPO = "acme/tiny-llama"


def test_publishes_the_selected_files_verified_with_the_manifest_last(kit: Kit, hub: FakeHub) -> None:
    contents = kit.model_files()
    hub.add(repository(REPO, contents, tags=["transformers", "conversational"]))
    job = kit.plan(hub, REPO)
    settings = kit.hf_settings(hub, job)

    assert kit.run(settings) == EXIT_PUBLISHED

    published = kit.manifest(job.digest)
    assert [item.path for item in published.files] == [
        "README.md",
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
    ]
    for item in published.files:
        assert kit.file_bytes(job.digest, item.path) == contents[item.path]
        assert item.sha256 == hashlib.sha256(contents[item.path]).hexdigest()  # type: ignore[arg-type]
        assert item.size == len(contents[item.path])
        assert item.etag is not None
    assert published.source.type is SourceType.HUGGING_FACE
    assert published.source.repository == REPO
    assert published.source.revision == job.revision
    assert published.source.endpoint == hub.url
    assert published.digest == job.digest
    assert published.resolved["format"] == "Safetensors"
    assert published.resolved["parameterCount"] == 100 * 64 + 64
    assert published.resolved["contextWindowTokens"] == 4096
    assert published.resolved["supportedEndpointTypes"] == ["Chat", "TextGeneration"]
    assert published.resolved["resources"]["dtype"] == "BF16"
    assert published.resolved["resources"]["weightsBytes"] == 100 * 64 * 2 + 64 * 4
    # Nothing but the selection and the manifest, and the manifest was the last object written.
    keys = kit.keys(job.digest)
    assert sorted(keys) == sorted([f"files/{item.path}" for item in published.files] + ["manifest.json"])
    manifest_time = (kit.store.root / manifest_key(kit.owner, job.digest)).stat().st_mtime_ns
    file_times = [
        (kit.store.root / (artifact_prefix(kit.owner, job.digest) + "files/" + item.path)).stat().st_mtime_ns
        for item in published.files
    ]
    assert manifest_time >= max(file_times)
    assert outcome_from_json(settings.termination_message_path.read_text()) is not None
    assert kit.outcome(settings) == {
        "reason": "ArtifactPublished",
        "digest": job.digest,
        "retryable": False,
        "message": f"published 5 files, {published.size_bytes} bytes, as {job.digest}",
    }


def test_large_files_stream_through_in_shards_and_match_the_hub_sha256(kit: Kit, hub: FakeHub) -> None:
    shards = {
        f"model-0000{n}-of-00002.safetensors": synthetic_safetensors(24 * MIB + n, seed=n) for n in (1, 2)
    }
    hub.add(repository(REPO, {**shards, "config.json": b"{}"}))
    job = kit.plan(hub, REPO)

    assert kit.run(kit.hf_settings(hub, job)) == EXIT_PUBLISHED

    published = kit.manifest(job.digest)
    by_path = {item.path: item for item in published.files}
    for path, shard in shards.items():
        assert by_path[path].sha256 == shard.sha256
        assert by_path[path].size == shard.size
    assert published.resolved["resources"]["parameterCount"] == sum(
        (shard.size - len(shard.prefix)) // 2 for shard in shards.values()
    )


def test_a_failure_midway_leaves_no_manifest_and_no_files(kit: Kit, hub: FakeHub) -> None:
    contents = {**kit.model_files(), "model-2.safetensors": synthetic_safetensors(6 * MIB, seed=9)}
    hub.add(repository(REPO, contents))
    job = kit.plan(hub, REPO)
    # The first file arrives; every later download fails for good (more 503s than retries).
    hub.error_next(1000, status=503, bucket="resolve", after=1)

    assert kit.run(kit.hf_settings(hub, job)) == EXIT_FAILED

    assert not kit.has_manifest(job.digest)
    assert kit.keys(job.digest) == []
    assert hub.count("resolve") > 2  # something was written before the failure


def test_a_changed_lfs_file_is_reported_damaged_and_removed(kit: Kit, hub: FakeHub) -> None:
    contents = kit.model_files()
    hub.add(repository(REPO, contents))
    job = kit.plan(hub, REPO)
    # The mirror now serves other bytes (same size) than the listing's sha256 says.
    changed = dict(contents)
    weights = contents["model.safetensors"]
    assert isinstance(weights, bytes)
    changed["model.safetensors"] = weights[:-1] + bytes([weights[-1] ^ 0xFF])
    tampered = repository(REPO, changed)
    hub.add(tampered)
    assert tampered.sha == job.revision

    settings = kit.hf_settings(hub, job)
    assert kit.run(settings) == EXIT_FAILED

    result = kit.outcome(settings)
    assert result["reason"] == ModelReason.ARTIFACT_DAMAGED.value
    assert result["retryable"] is True
    assert "model.safetensors" in result["message"]
    assert content_sha256(changed["model.safetensors"]) in result["message"]
    assert kit.keys(job.digest) == []


def test_the_listing_sha256_is_checked_when_the_job_does_not_carry_it(kit: Kit, hub: FakeHub) -> None:
    contents = kit.model_files()
    hub.add(repository(REPO, contents))
    job = kit.plan(hub, REPO)
    weights = contents["model.safetensors"]
    assert isinstance(weights, bytes)
    only_weights = [{**item, "lfsSha256": None} for item in job.files if item["path"] == "model.safetensors"]
    # The endpoint answers with other bytes of the right length than the Hub lists for the file.
    hub.fail_next(1, status=200, bucket="resolve", body=bytes(len(weights)))
    settings = kit.hf_settings(hub, job, files=only_weights)

    assert kit.run(settings) == EXIT_FAILED

    result = kit.outcome(settings)
    assert result["reason"] == ModelReason.ARTIFACT_DAMAGED.value
    assert content_sha256(weights) in result["message"]
    assert kit.keys(job.digest) == []


def test_a_file_shorter_than_listed_is_retried_then_damaged(kit: Kit, hub: FakeHub) -> None:
    contents = kit.model_files()
    hub.add(repository(REPO, contents))
    job = kit.plan(hub, REPO)
    only_weights = [item for item in job.files if item["path"] == "model.safetensors"]
    hub.fail_next(1000, status=200, bucket="resolve", body=b"{}")  # 2 bytes, not the listed size
    settings = kit.hf_settings(hub, job, files=only_weights)

    assert kit.run(settings) == EXIT_FAILED

    result = kit.outcome(settings)
    assert result["reason"] == ModelReason.ARTIFACT_DAMAGED.value
    assert result["retryable"] is True
    assert f"the Hub listed {len(contents['model.safetensors'])} bytes" in result["message"]
    assert str(kit.store.root) not in result["message"]  # the store's location stays in the log
    assert "artifacts/" not in result["message"]
    assert hub.count("resolve") == 3  # the policy's attempts


def test_files_without_weights_are_refused_before_any_download(kit: Kit, hub: FakeHub) -> None:
    hub.add(repository(REPO, kit.model_files()))
    job = kit.plan(hub, REPO)
    companions = [item for item in job.files if not item["path"].endswith(".safetensors")]
    settings = kit.hf_settings(hub, job, files=companions)

    assert kit.run(settings) == EXIT_FAILED

    assert kit.outcome(settings)["reason"] == ModelReason.UNSUPPORTED_SOURCE.value
    assert "no safetensors or GGUF weights" in kit.outcome(settings)["message"]
    assert hub.count("resolve") == 0


def test_a_branch_revision_is_pinned_to_its_commit(kit: Kit, hub: FakeHub) -> None:
    hub.add(repository(REPO, kit.model_files()))
    job = kit.plan(hub, REPO)
    settings = kit.hf_settings(hub, dataclasses.replace(job, revision="main"))

    assert kit.run(settings) == EXIT_PUBLISHED

    assert kit.manifest(job.digest).source.revision == job.revision
    assert all(f"/resolve/{job.revision}/" in request.path for request in hub.requests("resolve"))


def test_private_repository_needs_its_token(kit: Kit, hub: FakeHub) -> None:
    hub.add(repository(REPO, kit.model_files(), private_token="hf_secret"))
    job = kit.plan(hub, REPO, token="hf_secret")

    anonymous = kit.hf_settings(hub, job)
    assert kit.run(anonymous) == EXIT_FAILED
    refused = kit.outcome(anonymous)
    assert refused["reason"] == ModelReason.PUBLICATION_FAILED.value
    assert refused["retryable"] is False
    assert "spec.source.authSecretRef" in refused["message"]
    assert "HF_TOKEN" in refused["message"]
    assert REPO in refused["message"]

    wrong = kit.hf_settings(hub, job, token="hf_wrong")
    assert kit.run(wrong) == EXIT_FAILED
    assert "was refused with the given token" in kit.outcome(wrong)["message"]
    assert "hf_wrong" not in kit.outcome(wrong)["message"]

    authorized = kit.hf_settings(hub, job, token="hf_secret")
    assert kit.run(authorized) == EXIT_PUBLISHED
    assert len(kit.manifest(job.digest).files) == 5
    assert {request.headers.get("authorization") for request in hub.requests("resolve")} >= {
        "Bearer hf_secret"
    }


def test_gated_repository_without_a_token_names_the_secret(kit: Kit, hub: FakeHub) -> None:
    hub.add(repository(REPO, kit.model_files(), gated="manual"))
    job = kit.plan(hub, REPO)
    settings = kit.hf_settings(hub, job)

    assert kit.run(settings) == EXIT_FAILED

    result = kit.outcome(settings)
    assert result["reason"] == ModelReason.PUBLICATION_FAILED.value
    assert "gated" in result["message"]
    assert "spec.source.authSecretRef" in result["message"]


def test_no_token_is_sent_when_none_is_given_even_if_the_machine_has_one(
    kit: Kit, hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_from_the_machine")
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", "hf_from_the_machine")
    hub.add(repository(REPO, kit.model_files()))
    job = kit.plan(hub, REPO)

    assert kit.run(kit.hf_settings(hub, job)) == EXIT_PUBLISHED

    assert hub.requests()
    assert all("authorization" not in request.headers for request in hub.requests())


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ("repository", "the repository does not exist"),
        ("revision", "the revision does not exist"),
        ("file", "has no file missing.safetensors"),
    ],
)
def test_missing_repository_revision_or_file_is_source_not_found(
    kit: Kit, hub: FakeHub, change: str, named: str
) -> None:
    hub.add(repository(REPO, kit.model_files()))
    job = kit.plan(hub, REPO)
    if change == "repository":
        hub.remove(REPO)
    if change == "revision":
        job = dataclasses.replace(job, revision="0" * 40)
    if change == "file":
        job = dataclasses.replace(
            job, files=[*job.files, {"path": "missing.safetensors", "size": 10, "lfsSha256": None}]
        )
    settings = kit.hf_settings(hub, job)

    assert kit.run(settings) == EXIT_FAILED

    result = kit.outcome(settings)
    assert result["reason"] == ModelReason.SOURCE_NOT_FOUND.value
    assert result["retryable"] is False
    assert named in result["message"]
    assert REPO in result["message"]
    assert job.revision in result["message"]
    assert kit.keys(job.digest) == []


def test_a_file_that_vanished_after_the_listing_is_source_not_found_naming_it(kit: Kit, hub: FakeHub) -> None:
    contents = kit.model_files()
    hub.add(repository(REPO, contents))
    job = kit.plan(hub, REPO)
    model = hub.model(REPO)
    # Listed, but the download answers 404 EntryNotFound (the listing and the storage disagree).
    hub.fail_next(
        10,
        status=404,
        bucket="resolve",
        headers={"X-Error-Code": "EntryNotFound", "X-Error-Message": "Entry not found"},
        body=b'{"error": "Entry not found"}',
    )
    settings = kit.hf_settings(hub, job)

    assert kit.run(settings) == EXIT_FAILED

    result = kit.outcome(settings)
    assert result["reason"] == ModelReason.SOURCE_NOT_FOUND.value
    assert "the file does not exist at that revision" in result["message"]
    assert model.sha in result["message"]


def test_hub_outage_is_a_retryable_failure_after_retries(kit: Kit, hub: FakeHub) -> None:
    hub.add(repository(REPO, kit.model_files()))
    job = kit.plan(hub, REPO)
    hub.error_next(1000, status=503, bucket="resolve")
    settings = kit.hf_settings(hub, job)

    assert kit.run(settings) == EXIT_FAILED

    result = kit.outcome(settings)
    assert result["reason"] == ModelReason.PUBLICATION_FAILED.value
    assert result["retryable"] is True
    assert "HTTP 503" in result["message"]
    # Each file was tried as often as the policy allows, then the publication gave up.
    assert 3 <= hub.count("resolve") <= 3 * len(job.files)
    assert not kit.has_manifest(job.digest)


def test_a_rate_limit_longer_than_the_publisher_waits_is_retryable(kit: Kit, hub: FakeHub) -> None:
    hub.add(repository(REPO, kit.model_files()))
    job = kit.plan(hub, REPO)
    hub.rate_limit_next(1000, retry_after="120", bucket="resolve")
    settings = kit.hf_settings(hub, job)

    assert kit.run(settings) == EXIT_FAILED

    result = kit.outcome(settings)
    assert result["retryable"] is True
    assert "HTTP 429" in result["message"]


def test_momentary_failures_of_one_file_are_retried(kit: Kit, hub: FakeHub) -> None:
    contents = {**kit.model_files(), "model.safetensors": synthetic_safetensors(3 * MIB, seed=4)}
    hub.add(repository(REPO, contents))
    job = kit.plan(hub, REPO)
    hub.error_next(1, status=502, bucket="resolve")
    hub.drop_next(1, after_bytes=MIB + 17)

    assert kit.run(kit.hf_settings(hub, job)) == EXIT_PUBLISHED

    published = kit.manifest(job.digest)
    weights = {item.path: item for item in published.files}["model.safetensors"]
    assert weights.sha256 == content_sha256(contents["model.safetensors"])
    assert hub.count("resolve") == len(job.files) + 2


def test_lfs_downloads_follow_the_cdn_redirect_without_the_token(kit: Kit, hub: FakeHub) -> None:
    hub.add(repository(REPO, kit.model_files(), private_token="hf_secret"))
    job = kit.plan(hub, REPO, token="hf_secret")
    hub.redirect_lfs()

    assert kit.run(kit.hf_settings(hub, job, token="hf_secret")) == EXIT_PUBLISHED

    cdn = hub.requests("cdn")
    assert [request.path.rsplit("/", 1)[-1] for request in cdn] == ["model.safetensors"]
    assert all("authorization" not in request.headers for request in cdn)
    assert all(
        request.headers.get("authorization") == "Bearer hf_secret" for request in hub.requests("resolve")
    )
    assert len(kit.manifest(job.digest).files) == 5


def test_a_cluster_model_publishes_under_the_cluster_scope(kit: Kit, hub: FakeHub) -> None:
    hub.add(repository(REPO, kit.model_files()))
    job = kit.plan(hub, REPO)

    assert kit.run(kit.hf_settings(hub, job, owner=kit.cluster_owner)) == EXIT_PUBLISHED

    assert manifest_key(kit.cluster_owner, job.digest).startswith("artifacts/cluster/_cluster/shared/")
    assert kit.manifest(job.digest, owner=kit.cluster_owner).owner == kit.cluster_owner


def test_a_rerun_after_success_finds_the_artifact_and_downloads_nothing(kit: Kit, hub: FakeHub) -> None:
    hub.add(repository(REPO, kit.model_files()))
    job = kit.plan(hub, REPO)
    settings = kit.hf_settings(hub, job)
    assert kit.run(settings) == EXIT_PUBLISHED
    first = kit.store.get_bytes(manifest_key(kit.owner, job.digest))
    hub.reset_log()

    assert kit.run(settings) == EXIT_PUBLISHED

    assert hub.count("resolve") == 0
    assert kit.store.get_bytes(manifest_key(kit.owner, job.digest)) == first
    assert kit.outcome(settings)["reason"] == "ArtifactPublished"


def test_a_rerun_after_a_crash_rewrites_the_files(kit: Kit, hub: FakeHub) -> None:
    hub.add(repository(REPO, kit.model_files()))
    job = kit.plan(hub, REPO)
    settings = kit.hf_settings(hub, job)
    # A crashed attempt: one partial file and a stale manifest whose file is gone.
    prefix = artifact_prefix(kit.owner, job.digest)
    kit.store.put_bytes(prefix + "files/model.safetensors", b"partial")
    kit.store.put_bytes(manifest_key(kit.owner, job.digest), b'{"schema": 1}')

    assert kit.run(settings) == EXIT_PUBLISHED

    published = kit.manifest(job.digest)
    weights = {item.path: item for item in published.files}["model.safetensors"]
    assert kit.file_bytes(job.digest, "model.safetensors") != b"partial"
    assert weights.sha256 == content_sha256(kit.model_files()["model.safetensors"])


def test_a_gguf_repository_gets_its_profile_from_the_file_header(kit: Kit, hub: FakeHub) -> None:
    gguf = tiny_gguf(context_length=8192, block_count=2, file_type=15)
    hub.add(
        repository(
            "acme/tiny-GGUF",
            {"tiny-Q4_K_M.gguf": gguf, "tiny-Q8_0.gguf": tiny_gguf(file_type=7), "README.md": b"# x"},
            library_name=None,
            tags=["gguf", "text-generation"],
            gguf={"total": 1, "architecture": "llama", "context_length": 2048},
        )
    )
    job = kit.plan(hub, "acme/tiny-GGUF")

    assert kit.run(kit.hf_settings(hub, job)) == EXIT_PUBLISHED

    published = kit.manifest(job.digest)
    assert [item.path for item in published.files] == ["README.md", "tiny-Q4_K_M.gguf"]
    resolved = published.resolved
    assert resolved["format"] == "GGUF"
    assert resolved["quantization"] == "Q4_K_M"
    assert resolved["contextWindowTokens"] == 8192  # the file says so; the Hub's summary is older
    assert resolved["parameterCount"] == 768
    assert resolved["resources"]["layers"] == 2


def test_logs_say_which_file_started_and_finished(
    kit: Kit, hub: FakeHub, caplog: pytest.LogCaptureFixture
) -> None:
    hub.add(repository(REPO, kit.model_files()))
    job = kit.plan(hub, REPO)
    caplog.set_level(logging.INFO, logger="ai_models.publish")

    assert kit.run(kit.hf_settings(hub, job)) == EXIT_PUBLISHED

    stored = [record for record in caplog.records if record.getMessage() == "file stored"]
    assert sorted(record.__dict__["file"] for record in stored) == sorted(item["path"] for item in job.files)
    assert all(record.__dict__["bytes"] >= 0 and record.__dict__["seconds"] >= 0 for record in stored)
    summary = [record for record in caplog.records if record.getMessage() == "publication finished"]
    assert len(summary) == 1
    assert summary[0].__dict__["files"] == len(job.files)


def test_a_store_that_fails_is_a_retryable_failure(kit: Kit, hub: FakeHub) -> None:
    hub.add(repository(REPO, kit.model_files()))
    job = kit.plan(hub, REPO)
    blocked = kit.tmp_path / "not-a-directory"
    blocked.write_text("a file where the store's directory should be")
    settings = kit.hf_settings(hub, job, store_url=str(blocked))

    assert kit.run(settings) == EXIT_FAILED

    result = kit.outcome(settings)
    assert result["reason"] == ModelReason.PUBLICATION_FAILED.value
    assert result["retryable"] is True
    assert "object store" in result["message"]
    with pytest.raises(ObjectStoreError):
        DirectoryStore(blocked).put_bytes("x", b"")


def test_the_termination_message_is_the_outcome_json(kit: Kit, hub: FakeHub) -> None:
    hub.add(repository(REPO, kit.model_files()))
    job = kit.plan(hub, REPO)
    hub.remove(REPO)
    settings = kit.hf_settings(hub, job)

    assert kit.run(settings) == EXIT_FAILED

    text = settings.termination_message_path.read_text()
    parsed = outcome_from_json(text)
    assert parsed is not None
    assert parsed.reason is ModelReason.SOURCE_NOT_FOUND
    assert parsed.digest == job.digest
    assert json.loads(text)["message"] == parsed.message
    assert len(text) < 4096


@pytest.mark.parametrize(
    ("path", "content", "message"),
    [
        (
            "model.safetensors",
            struct.pack("<Q", 77)
            + b'{"weight":{"dtype":"F32","shape":[1000000000],"data_offsets":[0,4000000000]}}'
            + bytes(10),
            "model.safetensors is not a valid safetensors file",
        ),
        (
            "model-Q4_K_M.gguf",
            b"GGUF" + struct.pack("<IQQ", 3, 2, 3) + bytes(range(64)),
            "is not a valid GGUF file",
        ),
    ],
    ids=["safetensors", "gguf"],
)
def test_hub_weights_that_are_not_a_model_are_unsupported_never_retried(
    kit: Kit, hub: FakeHub, path: str, content: bytes, message: str
) -> None:
    hub.add(repository(REPO, {"config.json": b"{}", path: content}))
    job = kit.plan(hub, REPO)
    settings = kit.hf_settings(hub, job)

    assert kit.run(settings) == EXIT_FAILED

    outcome = kit.outcome(settings)
    assert outcome["reason"] == ModelReason.UNSUPPORTED_SOURCE.value
    assert outcome["retryable"] is False
    assert message in outcome["message"]
    assert f"{REPO} at revision {job.revision}" in outcome["message"]
    assert kit.keys(job.digest) == []
