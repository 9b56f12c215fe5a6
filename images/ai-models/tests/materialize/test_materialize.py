"""`ai-models materialize` as the console entry point against the api (real app under uvicorn,
delivery token checked with the key in the API emulator) serving a directory store.

A pod may mount `object_dir(digest)` only once `completion_record(digest)` names it: every test
checks that a tree is published whole and verified, or not at all.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ai_models.adapters.objectstore import S3Store
from ai_models.domain.delivery.claim_layout import completion_record, object_dir, staging_dir
from fakes.model_files import MIB, SyntheticFile
from fakes.s3 import S3Bucket
from fakes.served_artifacts import publish_ready
from support.tcpproxy import TcpProxy
from support.tls_files import foreign_ca

NAMESPACE = "team-a"
SMALL = {
    "config.json": b'{"model_type": "llama"}',
    "tokenizer/vocab.json": b'{"a": 1}',
    "empty.txt": b"",
    "model.safetensors": bytes(range(256)) * 4096,
}
BIG = "model-00001-of-00001.safetensors"
BIG_SIZE = 8 * MIB
PAUSE_AT = 3 * MIB


def big_files() -> dict[str, bytes]:
    return {"config.json": b"{}", BIG: SyntheticFile(BIG_SIZE, seed=7).to_bytes()}


def assert_delivered(claim: Path, digest: str, files: dict[str, bytes]) -> None:
    tree = claim / object_dir(digest)
    found = {path.relative_to(tree).as_posix() for path in tree.rglob("*") if path.is_file()}
    assert found == set(files)
    for path, data in files.items():
        assert hashlib.sha256((tree / path).read_bytes()).digest() == hashlib.sha256(data).digest(), path
    record = json.loads((claim / completion_record(digest)).read_text())
    assert record["digest"] == digest
    assert record["bytes"] == sum(len(data) for data in files.values())
    assert {item["path"] for item in record["files"]} == set(files)
    assert record["completedAt"].endswith("Z")
    assert not (claim / staging_dir(digest)).exists()


def assert_not_published(claim: Path, digest: str) -> None:
    assert not (claim / object_dir(digest)).exists()
    assert not (claim / completion_record(digest)).exists()


def staged_size(claim: Path, digest: str, path: str) -> int:
    target = claim / staging_dir(digest) / path
    return target.stat().st_size if target.exists() else 0


def test_every_artifact_of_a_workload_is_materialized_verified_and_marked_complete(
    served: Any, tmp_path: Path
) -> None:
    model = publish_ready(served.emulator, served.store, "llama", SMALL, namespace=NAMESPACE)
    shared_files = {"weights.gguf": b"GGUF" + bytes(1000)}
    shared = publish_ready(served.emulator, served.store, "qwen", shared_files, namespace=None)
    claim = tmp_path / "claim"
    claim.mkdir()
    job = served.materializer({"llama": model, "qwen": shared}, claim=claim)

    assert job.run() == 0, job.process.log()

    assert_delivered(claim, model[1], SMALL)
    assert_delivered(claim, shared[1], shared_files)
    outcome = job.outcome()
    assert outcome["succeeded"] is True
    assert outcome["delivered"] == [model[1], shared[1]]
    assert job.summary()["bytes_fetched"] == sum(
        len(data) for data in [*SMALL.values(), *shared_files.values()]
    )
    token = job.process._env["AI_MODELS_MATERIALIZE_TOKEN"]
    assert token not in job.process.log()
    assert token not in job.termination.read_text()


def test_artifacts_the_api_serves_from_s3_are_materialized_the_same_way(
    served: Any, s3_bucket: S3Bucket, tmp_path: Path
) -> None:
    store = S3Store(
        s3_bucket.name, endpoint_url=s3_bucket.server.endpoint_url, session=s3_bucket.server.session()
    )
    url = served.serve(store)
    owner, digest = publish_ready(served.emulator, store, "llama", SMALL, namespace=NAMESPACE)
    claim = tmp_path / "claim"
    claim.mkdir()
    # The Job has no S3 settings or credentials: its files come from the serving API only.
    job = served.materializer({"llama": (owner, digest)}, claim=claim, url=url)
    assert job.run() == 0, job.process.log()
    assert_delivered(claim, digest, SMALL)


def test_the_materializer_refuses_a_server_the_module_ca_did_not_sign(served: Any, tmp_path: Path) -> None:
    owner, digest = publish_ready(served.emulator, served.store, "llama", SMALL, namespace=NAMESPACE)
    claim = tmp_path / "claim"
    claim.mkdir()
    other = foreign_ca(tmp_path / "other").read_text()
    untrusted = served.materializer({"llama": (owner, digest)}, claim=claim, ca_pem=other, run="untrusted")
    assert untrusted.run() == 1, untrusted.process.log()
    assert "certificate the Job does not trust" in untrusted.outcome()["message"]
    assert_not_published(claim, digest)

    trusted = served.materializer({"llama": (owner, digest)}, claim=claim, run="ok")
    assert trusted.run() == 0, trusted.process.log()
    assert_delivered(claim, digest, SMALL)


def test_the_materializer_refuses_to_start_on_plain_http(served: Any, tmp_path: Path) -> None:
    owner, digest = publish_ready(served.emulator, served.store, "llama", SMALL, namespace=NAMESPACE)
    claim = tmp_path / "claim"
    claim.mkdir()
    plain = served.url.replace("https://", "http://")
    job = served.materializer({"llama": (owner, digest)}, claim=claim, url=plain, run="plain")
    assert job.run() == 2, job.process.log()
    assert "AI_MODELS_MATERIALIZE_API_URL must be an https URL" in job.outcome()["message"]
    assert_not_published(claim, digest)


def test_a_materializer_killed_mid_copy_is_resumed_by_the_next_one_from_what_staging_holds(
    served: Any, tmp_path: Path
) -> None:
    files = big_files()
    owner, digest = publish_ready(served.emulator, served.store, "llama", files, namespace=NAMESPACE)
    claim = tmp_path / "claim"
    claim.mkdir()
    served.gate.pause(BIG, at=PAUSE_AT)
    first = served.materializer({"llama": (owner, digest)}, claim=claim, run="first").start()
    first.process.wait_until(
        lambda: staged_size(claim, digest, BIG) == PAUSE_AT, timeout=30, what="the first bytes in staging"
    )

    first.process.kill()
    assert_not_published(claim, digest)
    served.gate.release()
    second = served.materializer({"llama": (owner, digest)}, claim=claim, run="second")
    assert second.run() == 0, second.process.log()

    assert_delivered(claim, digest, files)
    summary = second.summary()
    total = sum(len(data) for data in files.values())
    assert summary["bytes_fetched"] < total
    # What the first Job had in staging (the small file, the big one's first bytes) is kept.
    assert summary["bytes_fetched"] == BIG_SIZE - PAUSE_AT
    assert summary["bytes_reused"] == total - summary["bytes_fetched"]


def test_the_serving_api_gone_mid_copy_fails_the_job_publishing_nothing_and_the_next_job_resumes(
    served: Any, tmp_path: Path
) -> None:
    files = big_files()
    owner, digest = publish_ready(served.emulator, served.store, "llama", files, namespace=NAMESPACE)
    claim = tmp_path / "claim"
    claim.mkdir()
    port = int(served.url.rsplit(":", 1)[1])
    with TcpProxy("127.0.0.1", port) as proxy:
        served.gate.pause(BIG, at=PAUSE_AT)
        job = served.materializer({"llama": (owner, digest)}, claim=claim, url=proxy.url("https"), run="cut")
        job.start()
        job.process.wait_until(
            lambda: staged_size(claim, digest, BIG) == PAUSE_AT, timeout=30, what="the first bytes in staging"
        )
        proxy.block()

        assert job.wait(timeout=60) == 1, job.process.log()
        assert_not_published(claim, digest)
        outcome = job.outcome()
        assert outcome["succeeded"] is False
        assert outcome["retryable"] is True
        assert "serving API" in outcome["message"]
        assert "Model team-a/llama" in outcome["message"]

        proxy.unblock()
        served.gate.release()
        again = served.materializer(
            {"llama": (owner, digest)}, claim=claim, url=proxy.url("https"), run="again"
        )
        assert again.run() == 0, again.process.log()
    assert_delivered(claim, digest, files)
    assert again.summary()["bytes_fetched"] == BIG_SIZE - PAUSE_AT


def test_a_file_that_does_not_match_its_manifest_sha256_is_never_published(
    served: Any, tmp_path: Path
) -> None:
    owner, digest = publish_ready(
        served.emulator,
        served.store,
        "llama",
        SMALL,
        namespace=NAMESPACE,
        manifest_sha256={"model.safetensors": hashlib.sha256(b"something else").hexdigest()},
    )
    claim = tmp_path / "claim"
    claim.mkdir()
    job = served.materializer({"llama": (owner, digest)}, claim=claim)

    assert job.run() == 1, job.process.log()

    assert_not_published(claim, digest)
    assert staged_size(claim, digest, "model.safetensors") == 0
    outcome = job.outcome()
    assert outcome["succeeded"] is False
    assert outcome["retryable"] is False
    assert "'model.safetensors'" in outcome["message"]
    assert "sha256" in outcome["message"]
    assert "Model team-a/llama" in outcome["message"]


def test_a_complete_tree_is_skipped_without_asking_the_serving_api(served: Any, tmp_path: Path) -> None:
    owner, digest = publish_ready(served.emulator, served.store, "llama", SMALL, namespace=NAMESPACE)
    claim = tmp_path / "claim"
    claim.mkdir()
    assert served.materializer({"llama": (owner, digest)}, claim=claim, run="first").run() == 0
    with TcpProxy("127.0.0.1", 9) as gone:
        gone.block()  # nothing answers at this address
        job = served.materializer(
            {"llama": (owner, digest)}, claim=claim, url=gone.url("https"), run="second"
        )
        assert job.run() == 0, job.process.log()
    assert job.summary()["bytes_fetched"] == 0
    assert job.summary()["skipped"] == 1
    assert "artifact already on the claim" in job.process.log()
    assert_delivered(claim, digest, SMALL)


def test_a_stale_tree_without_its_record_and_a_damaged_staged_file_are_replaced(
    served: Any, tmp_path: Path
) -> None:
    owner, digest = publish_ready(served.emulator, served.store, "llama", SMALL, namespace=NAMESPACE)
    claim = tmp_path / "claim"
    stale = claim / object_dir(digest)
    stale.mkdir(parents=True)
    (stale / "leftover.bin").write_bytes(b"from a Job that never finished")
    staged = claim / staging_dir(digest)
    staged.mkdir(parents=True)
    wrong = bytearray(SMALL["model.safetensors"])
    wrong[5] ^= 0xFF
    (staged / "model.safetensors").write_bytes(bytes(wrong))  # complete in size, wrong in content
    (staged / "config.json").write_bytes(SMALL["config.json"])  # complete and right: kept
    (staged / "unlisted.bin").write_bytes(b"not in the manifest")

    job = served.materializer({"llama": (owner, digest)}, claim=claim)
    assert job.run() == 0, job.process.log()

    assert_delivered(claim, digest, SMALL)
    assert job.summary()["bytes_reused"] == len(SMALL["config.json"])


def test_invalid_settings_exit_2_with_an_outcome_naming_every_bad_variable(tmp_path: Path) -> None:
    termination = tmp_path / "termination"
    env = {
        "AI_MODELS_MATERIALIZE_API_URL": "ftp://api",
        "AI_MODELS_MATERIALIZE_ARTIFACTS": '[{"name": "Bad Name"}]',
        "AI_MODELS_MATERIALIZE_TERMINATION_MESSAGE_PATH": str(termination),
    }
    from support.processes import ModuleProcess  # noqa: PLC0415

    process = ModuleProcess("materialize", env=env, log_path=tmp_path / "log")
    with process:
        process.wait_until(lambda: not process.running(), timeout=30, what="the materializer to exit")
        assert process.terminate() == 2
    message = json.loads(termination.read_text())["message"]
    for variable in ("API_URL", "TARGET_DIR", "ARTIFACTS", "TOKEN", "CA_BUNDLE"):
        assert f"AI_MODELS_MATERIALIZE_{variable} " in message
