"""Object-store keys of artifacts and uploads: every key `locate()`s back to its artifact, and no
two owners (or two digests of one owner) ever share a prefix."""

from __future__ import annotations

import hashlib
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ai_models.domain.artifacts.layout import (
    ARTIFACTS_ROOT,
    CLUSTER_NAMESPACE_SEGMENT,
    ArtifactLocation,
    artifact_prefix,
    digest_hex,
    file_key,
    locate,
    manifest_key,
    owner_prefix,
    scope_of,
    upload_payload_key,
    upload_prefix,
    upload_record_key,
)
from ai_models.domain.storage.ledger import Owner, Scope
from ai_models.names import ModelKind

BOUNDED = settings(max_examples=200, deadline=None)


def digest_of(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


DIGEST = digest_of("llama")
OTHER_DIGEST = digest_of("qwen")
LLAMA = Owner(kind=ModelKind.MODEL, namespace="team-a", name="llama", uid="uid-1")
CLUSTER_LLAMA = Owner(kind=ModelKind.CLUSTER_MODEL, namespace="", name="llama", uid="uid-2")

# Kubernetes object names: DNS subdomains (Model, ClusterModel) and DNS labels (namespaces).
LABEL = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?\Z")
SUBDOMAIN = st.lists(LABEL, min_size=1, max_size=3).map(".".join)
DIGESTS = st.binary(min_size=1, max_size=16).map(lambda data: "sha256:" + hashlib.sha256(data).hexdigest())
MODEL_PATH = st.lists(st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._+-]{0,12}\Z"), min_size=1, max_size=4).map(
    "/".join
)


@st.composite
def owners(draw: st.DrawFn) -> Owner:
    kind = draw(st.sampled_from(list(ModelKind)))
    namespace = "" if kind is ModelKind.CLUSTER_MODEL else draw(LABEL)
    return Owner(kind=kind, namespace=namespace, name=draw(SUBDOMAIN), uid=draw(st.uuids()).hex)


def expected_location(owner: Owner, digest: str) -> ArtifactLocation:
    scope = scope_of(owner.kind)
    return ArtifactLocation(
        scope=scope,
        namespace="" if scope is Scope.CLUSTER else owner.namespace,
        name=owner.name,
        digest=digest,
    )


def test_keys_of_a_namespaced_model() -> None:
    hex_digest = DIGEST.removeprefix("sha256:")
    assert owner_prefix(LLAMA) == "artifacts/namespaced/team-a/llama/"
    assert artifact_prefix(LLAMA, DIGEST) == f"artifacts/namespaced/team-a/llama/{hex_digest}/"
    assert manifest_key(LLAMA, DIGEST) == f"artifacts/namespaced/team-a/llama/{hex_digest}/manifest.json"
    assert (
        file_key(LLAMA, DIGEST, "tokenizer/vocab.json")
        == f"artifacts/namespaced/team-a/llama/{hex_digest}/files/tokenizer/vocab.json"
    )
    assert upload_prefix(LLAMA) == "uploads/namespaced/team-a/llama/uid-1/"
    assert upload_payload_key(LLAMA) == "uploads/namespaced/team-a/llama/uid-1/payload"
    assert upload_record_key(LLAMA) == "uploads/namespaced/team-a/llama/uid-1/upload.json"


def test_a_cluster_model_ignores_whatever_namespace_its_owner_carries() -> None:
    with_namespace = Owner(kind=ModelKind.CLUSTER_MODEL, namespace="team-a", name="llama", uid="uid-2")
    assert owner_prefix(CLUSTER_LLAMA) == "artifacts/cluster/_cluster/llama/"
    assert owner_prefix(with_namespace) == owner_prefix(CLUSTER_LLAMA)
    assert upload_prefix(CLUSTER_LLAMA) == "uploads/cluster/_cluster/llama/uid-2/"
    assert scope_of(ModelKind.CLUSTER_MODEL) is Scope.CLUSTER
    assert scope_of(ModelKind.MODEL) is Scope.NAMESPACED


def test_a_repository_file_named_manifest_json_cannot_replace_the_manifest() -> None:
    assert file_key(LLAMA, DIGEST, "manifest.json") != manifest_key(LLAMA, DIGEST)
    assert file_key(LLAMA, DIGEST, "manifest.json").startswith(artifact_prefix(LLAMA, DIGEST) + "files/")


def test_a_recreated_model_never_sees_the_old_upload() -> None:
    recreated = Owner(kind=ModelKind.MODEL, namespace="team-a", name="llama", uid="uid-3")
    assert upload_payload_key(recreated) != upload_payload_key(LLAMA)
    assert not upload_prefix(recreated).startswith(upload_prefix(LLAMA))
    # Artifacts are named by content, not by UID: the re-created Model finds the same digest's.
    assert artifact_prefix(recreated, DIGEST) == artifact_prefix(LLAMA, DIGEST)


@pytest.mark.parametrize(
    "owner",
    [
        Owner(kind=ModelKind.MODEL, namespace="team-a", name="", uid="u"),
        Owner(kind=ModelKind.MODEL, namespace="", name="llama", uid="u"),
        Owner(kind=ModelKind.CLUSTER_MODEL, namespace="", name="", uid="u"),
    ],
)
def test_an_owner_without_name_or_namespace_has_no_keys(owner: Owner) -> None:
    with pytest.raises(ValueError, match="needs a name"):
        owner_prefix(owner)
    with pytest.raises(ValueError, match="needs a name"):
        upload_prefix(owner)


@pytest.mark.parametrize(
    "digest",
    [
        "",
        DIGEST.removeprefix("sha256:"),  # no algorithm
        "sha512:" + DIGEST.removeprefix("sha256:"),
        DIGEST.upper(),
        "sha256:" + DIGEST.removeprefix("sha256:").upper(),
        DIGEST[:-1],  # 63 hex digits
        DIGEST + "0",  # 65 hex digits
        DIGEST[:-1] + "g",
        DIGEST + "\n",
        DIGEST + "/",
        " " + DIGEST,
        "sha256:../../../etc",
    ],
)
def test_an_invalid_digest_is_refused(digest: str) -> None:
    with pytest.raises(ValueError, match="is not a digest"):
        digest_hex(digest)
    with pytest.raises(ValueError, match="is not a digest"):
        artifact_prefix(LLAMA, digest)
    with pytest.raises(ValueError, match="is not a digest"):
        manifest_key(LLAMA, digest)
    with pytest.raises(ValueError, match="is not a digest"):
        file_key(LLAMA, digest, "config.json")


def test_digest_hex_is_the_directory_name() -> None:
    assert digest_hex(DIGEST) == hashlib.sha256(b"llama").hexdigest()


@pytest.mark.parametrize("owner", [LLAMA, CLUSTER_LLAMA])
def test_locate_finds_the_artifact_of_every_key_the_layout_produces(owner: Owner) -> None:
    expected = expected_location(owner, DIGEST)
    for key in (
        artifact_prefix(owner, DIGEST),
        manifest_key(owner, DIGEST),
        file_key(owner, DIGEST, "model.safetensors"),
        file_key(owner, DIGEST, "unet/diffusion_pytorch_model.safetensors"),
        file_key(owner, DIGEST, "a/b/c/d/e.json"),
    ):
        assert locate(key) == expected, key
    assert expected.prefix == artifact_prefix(owner, DIGEST)
    assert expected.kind == owner.kind


@given(owner=owners(), digest=DIGESTS, path=MODEL_PATH)
@BOUNDED
def test_locate_round_trips_any_owner_digest_and_path(owner: Owner, digest: str, path: str) -> None:
    expected = expected_location(owner, digest)
    assert locate(artifact_prefix(owner, digest)) == expected
    assert locate(manifest_key(owner, digest)) == expected
    assert locate(file_key(owner, digest, path)) == expected
    assert expected.prefix == artifact_prefix(owner, digest)
    assert file_key(owner, digest, path).startswith(expected.prefix)


@given(first=owners(), second=owners(), first_digest=DIGESTS, second_digest=DIGESTS)
@BOUNDED
def test_distinct_artifacts_never_share_a_prefix(
    first: Owner, second: Owner, first_digest: str, second_digest: str
) -> None:
    one = expected_location(first, first_digest)
    other = expected_location(second, second_digest)
    if one == other:
        assert artifact_prefix(first, first_digest) == artifact_prefix(second, second_digest)
        return
    assert not artifact_prefix(first, first_digest).startswith(artifact_prefix(second, second_digest))
    assert not artifact_prefix(second, second_digest).startswith(artifact_prefix(first, first_digest))
    if (one.scope, one.namespace, one.name) != (other.scope, other.namespace, other.name):
        assert not owner_prefix(first).startswith(owner_prefix(second))
        assert not owner_prefix(second).startswith(owner_prefix(first))


def test_a_name_that_extends_another_never_shares_its_prefix() -> None:
    names = ["a", "a-2", "a.2", "ab", "a-2-3"]
    owners_ = [Owner(kind=ModelKind.MODEL, namespace="team-a", name=name, uid=name) for name in names]
    owners_ += [Owner(kind=ModelKind.MODEL, namespace=name, name="m", uid=name) for name in names]
    owners_ += [Owner(kind=ModelKind.CLUSTER_MODEL, namespace="", name=name, uid=name) for name in names]
    for one, other in itertools.permutations(owners_, 2):
        assert not owner_prefix(one).startswith(owner_prefix(other)), (one, other)
        assert not upload_prefix(one).startswith(upload_prefix(other)), (one, other)
        assert not artifact_prefix(one, DIGEST).startswith(owner_prefix(other)), (one, other)
        assert locate(manifest_key(one, DIGEST)) == expected_location(one, DIGEST)


def test_two_digests_of_one_owner_are_separate_directories() -> None:
    assert artifact_prefix(LLAMA, DIGEST) != artifact_prefix(LLAMA, OTHER_DIGEST)
    assert not artifact_prefix(LLAMA, DIGEST).startswith(artifact_prefix(LLAMA, OTHER_DIGEST))
    assert locate(manifest_key(LLAMA, OTHER_DIGEST)) == expected_location(LLAMA, OTHER_DIGEST)


def test_a_model_in_a_namespace_called_like_the_cluster_segment_stays_apart_from_cluster_models() -> None:
    # Kubernetes namespace names cannot start with `_`; the layout must not rely on that.
    impostor = Owner(kind=ModelKind.MODEL, namespace=CLUSTER_NAMESPACE_SEGMENT, name="llama", uid="uid-2")
    assert owner_prefix(impostor) != owner_prefix(CLUSTER_LLAMA)
    assert not owner_prefix(impostor).startswith(owner_prefix(CLUSTER_LLAMA))
    assert not owner_prefix(CLUSTER_LLAMA).startswith(owner_prefix(impostor))
    assert upload_prefix(impostor) != upload_prefix(CLUSTER_LLAMA)
    impostor_location = locate(manifest_key(impostor, DIGEST))
    cluster_location = locate(manifest_key(CLUSTER_LLAMA, DIGEST))
    assert impostor_location == ArtifactLocation(
        scope=Scope.NAMESPACED, namespace=CLUSTER_NAMESPACE_SEGMENT, name="llama", digest=DIGEST
    )
    assert impostor_location.kind is ModelKind.MODEL
    assert cluster_location == ArtifactLocation(
        scope=Scope.CLUSTER, namespace="", name="llama", digest=DIGEST
    )
    assert cluster_location.kind is ModelKind.CLUSTER_MODEL


@pytest.mark.parametrize(
    "key",
    [
        "",
        "catalog/hf/manifest.json",
        "uploads/namespaced/team-a/llama/uid-1/payload",
        f"artifacts/namespaced/team-a/llama/{DIGEST.removeprefix('sha256:')}",  # the directory itself
        "artifacts/namespaced/team-a/llama/",
        "artifacts/namespaced/team-a/",
        "artifacts/",
        f"artifacts/global/team-a/llama/{DIGEST.removeprefix('sha256:')}/manifest.json",
        f"artifacts/Namespaced/team-a/llama/{DIGEST.removeprefix('sha256:')}/manifest.json",
        f"artifacts/cluster/team-a/llama/{DIGEST.removeprefix('sha256:')}/manifest.json",
        f"artifacts/cluster//llama/{DIGEST.removeprefix('sha256:')}/manifest.json",
        f"artifacts/namespaced//llama/{DIGEST.removeprefix('sha256:')}/manifest.json",
        f"artifacts/namespaced/team-a//{DIGEST.removeprefix('sha256:')}/manifest.json",
        f"artifacts/cluster/_cluster//{DIGEST.removeprefix('sha256:')}/manifest.json",
        "artifacts/namespaced/team-a/llama/not-a-digest/manifest.json",
        f"artifacts/namespaced/team-a/llama/{DIGEST.removeprefix('sha256:').upper()}/manifest.json",
        f"artifacts/namespaced/team-a/llama/{DIGEST.removeprefix('sha256:')}\n/manifest.json",
        f"artifacts/namespaced/team-a/llama/{DIGEST}/manifest.json",  # `sha256:` in the directory
        f"xartifacts/namespaced/team-a/llama/{DIGEST.removeprefix('sha256:')}/manifest.json",
    ],
)
def test_locate_ignores_keys_outside_the_layout(key: str) -> None:
    assert locate(key) is None


def test_a_location_rebuilds_its_prefix_for_both_scopes() -> None:
    for owner in (LLAMA, CLUSTER_LLAMA):
        location = locate(file_key(owner, DIGEST, "config.json"))
        assert location is not None
        assert location.prefix == artifact_prefix(owner, DIGEST)
        assert location.prefix.startswith(ARTIFACTS_ROOT)


KEY_SEGMENTS = st.sampled_from(
    [
        *("namespaced", "cluster", "_cluster", "team-a", "llama", "", "manifest.json", "files", "x\n"),
        *("sha256:", DIGEST.removeprefix("sha256:"), DIGEST.removeprefix("sha256:") + "\n"),
    ]
)


@given(segments=st.lists(KEY_SEGMENTS, max_size=7), root=st.sampled_from(["artifacts/", "uploads/", ""]))
@BOUNDED
def test_any_located_key_lies_under_its_artifacts_prefix(segments: list[str], root: str) -> None:
    key = root + "/".join(segments)
    location = locate(key)
    if location is None:
        return
    assert key.startswith(location.prefix)
    assert location.name
    assert location.namespace or location.scope is Scope.CLUSTER
    assert locate(location.prefix) == location
