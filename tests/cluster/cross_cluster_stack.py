"""Two ai-models clusters for cross-cluster tests: each its own API emulator (with the module's
rendered RBAC), its own S3 bucket, and its controller and api as real processes (the publication
stack of `model_stack`); one fake Hub and one moto server behind both (two buckets: two stores).

    serving   publishes ClusterModels from the fake Hub; its api serves them to the other cluster
    consuming has an AIModels ModelCatalogSource pointed at the serving cluster's api, with a
              token the serving cluster accepts (a subject there with access level User)

The stack is started once per test file (`cross_cluster_stack`, a module fixture enters it): the
two module installs and four processes take a while, and no test needs a pristine cluster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ai_models import names
from cluster.catalog_stack import sync_request
from cluster.model_stack import ModelStack, model_stack
from fakes.hub import FakeHub
from fakes.hub_corpus import FakeModel
from fakes.s3 import S3Bucket, fresh_bucket_name, start_moto_server
from kubeemu.authn import Identity, new_token
from kubeemu.pytest_fixtures import REPO_CRDS, start_emulator
from support.module_install import MODULE_NAMESPACE
from testbed.access_levels import grant_access_level

GROUP, VERSION = names.API_GROUP, names.API_VERSION
# The Secret in the consuming cluster's module namespace that holds the serving cluster's token.
TOKEN_SECRET = "serving-cluster-token"


@dataclasses.dataclass
class CrossClusterStack:
    serving: ModelStack
    consuming: ModelStack
    reader: Identity  # the serving cluster's subject whose token the consuming cluster holds
    closed_port: int  # bound and never listened on: an endpoint nothing answers
    _catalog_reader: Identity | None = None

    @property
    def serving_endpoint(self) -> str:
        """The serving cluster's serving API, as spec.aiModels.endpoint names it."""
        return f"http://127.0.0.1:{self.serving.api_port}"

    def publish_cluster_model(self, name: str, repository: str) -> dict[str, Any]:
        """A ClusterModel of the serving cluster from the fake Hub, once it is Ready: its status."""
        self.serving.create_cluster_model(name, {"url": f"https://huggingface.co/{repository}"})
        return self.serving.wait_phase(name, "Ready", namespace=None, timeout=120)

    def token_secret(self, name: str, token: str) -> None:
        """The token Secret and, as the cluster administrator grants it, the controller's read of it."""
        self.consuming.secret(name, MODULE_NAMESPACE, {"token": token})
        self.consuming.grant_secret_read(name, MODULE_NAMESPACE)

    def ai_models_source(
        self,
        name: str,
        *,
        endpoint: str | None = None,
        token_secret: str = TOKEN_SECRET,
        ca_bundle: str | None = None,
        opted_in: bool = True,
        opt_in_value: str = names.CATALOG_SYNC_ENABLED,
    ) -> dict[str, Any]:
        """An AIModels ModelCatalogSource in the consuming cluster, opted in to sync unless told not to
        (`opt_in_value`: what the opt-in annotation says, to write a wrong one)."""
        settings: dict[str, Any] = {
            "endpoint": endpoint or self.serving_endpoint,
            "tokenSecretRef": {"name": token_secret},
        }
        if ca_bundle is not None:
            settings["caBundle"] = ca_bundle
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ModelCatalogSource",
            "metadata": {
                "name": name,
                "annotations": {names.CATALOG_SYNC_ANNOTATION: opt_in_value} if opted_in else {},
            },
            "spec": {"provider": names.CatalogProvider.AI_MODELS.value, "aiModels": settings},
        }
        created: dict[str, Any] = self.consuming.objects.create_cluster_custom_object(
            GROUP, VERSION, names.Plural.MODEL_CATALOG_SOURCES, body
        )
        return created

    def source_status(self, name: str) -> dict[str, Any]:
        found = self.consuming.objects.get_cluster_custom_object(
            GROUP, VERSION, names.Plural.MODEL_CATALOG_SOURCES, name
        )
        return dict(found.get("status") or {})

    def request_sync(self, name: str) -> None:
        """Ask the consuming cluster's controller for a pass of source `name` now."""
        self.consuming.objects.patch_cluster_custom_object(
            GROUP,
            VERSION,
            names.Plural.MODEL_CATALOG_SOURCES,
            name,
            {"metadata": {"annotations": sync_request()}},
        )

    def entry(self, source: str, entry: str) -> dict[str, Any] | None:
        """Entry `entry` of `source` as the consuming cluster's catalog API serves it (None: not yet)."""
        self._catalog_reader = self._catalog_reader or self.consuming.uploader("User")
        reader = self._catalog_reader  # catalogimports without a namespace limit
        path = (
            f"{names.CATALOG_IMPORT_API_PREFIX}/sources/{source}/models/{urllib.parse.quote(entry, safe='')}"
        )
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.consuming.api_port}{path}",
            headers={"Authorization": f"Bearer {reader.token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                found: dict[str, Any] = json.loads(response.read())
                return found
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise

    def model_from(self, name: str, source: str, entry: str) -> dict[str, Any]:
        """A Model in the consuming cluster from entry `entry` of catalog source `source`."""
        return self.consuming.create_model(name, {"catalog": {"sourceName": source, "name": entry}})

    def wait_reason(self, name: str, reason: str, *, timeout: float = 60) -> dict[str, Any]:
        """The consuming Model's ArtifactResolved condition once its reason is `reason`."""
        self.consuming.eventually(
            lambda: self.consuming.condition(name, "ArtifactResolved").get("reason") == reason,
            timeout=timeout,
            what=lambda: f"Model {name} with reason {reason} (now {self.consuming.status(name)})",
        )
        return self.consuming.condition(name, "ArtifactResolved")


@contextlib.contextmanager
def cross_cluster_stack(workdir: Path, corpus: Sequence[FakeModel]) -> Iterator[CrossClusterStack]:
    with contextlib.ExitStack() as started:
        hub = started.enter_context(FakeHub(corpus))
        server = started.enter_context(start_moto_server(workdir / "moto"))
        stacks: list[ModelStack] = []
        for cluster in ("serving", "consuming"):
            emulator = start_emulator(workdir / cluster / "emulator", crd_dirs=[REPO_CRDS])
            started.callback(emulator.close)
            bucket = S3Bucket(name=fresh_bucket_name(), server=server)
            server.create_bucket(bucket.name)
            stack_dir = workdir / cluster / "stack"
            stack_dir.mkdir(parents=True)
            stack = started.enter_context(
                contextlib.contextmanager(model_stack)(emulator, hub, bucket, stack_dir)
            )
            stack.api()
            stack.controller()
            stacks.append(stack)
        serving, consuming = stacks
        reader = serving.emulator.add_identity(
            Identity(name="consuming-cluster", token=new_token(), groups=("ai-models-readers",))
        )
        grant_access_level(serving.emulator.cluster, reader, "User")
        closed = started.enter_context(socket.socket())
        closed.bind(("127.0.0.1", 0))
        clusters = CrossClusterStack(
            serving=serving, consuming=consuming, reader=reader, closed_port=int(closed.getsockname()[1])
        )
        clusters.token_secret(TOKEN_SECRET, reader.token)
        yield clusters
