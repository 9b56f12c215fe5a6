"""The objects a Model's failure may depend on, read as they are now (one cheap GET each).

A Model with `spec.source.authSecretRef` depends on that Secret, one with `spec.source.catalog` on
its ModelCatalogSource. Their resourceVersion is what a failure records and what a later read is
compared with: a Failed object is retried at once when it differs. The controller may only `get`
the Secrets granted to it by name (no list or watch, no cluster-wide read, D160), so Secrets are
read again every few seconds while their dependant is Failed, and one it may not read yet counts
as missing; ModelCatalogSources are watched, and a change enqueues the
objects that name them.
"""

from __future__ import annotations

from typing import Any

from ai_models.adapters.kube.catalog_sources import CatalogSourceObjects
from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.secrets import Secrets
from ai_models.domain.models.decision import Dependency, DependencyKind
from ai_models.domain.models.source import CatalogSource, HuggingFaceSource, ParsedSource


class DependencyReader:
    def __init__(self, api_client: Any) -> None:
        self._secrets = Secrets(api_client)
        self._sources = CatalogSourceObjects(api_client)

    def read(self, source: ParsedSource) -> Dependency | None:
        if isinstance(source, HuggingFaceSource) and source.secret_name and source.secret_namespace:
            return Dependency(
                DependencyKind.SECRET,
                source.secret_name,
                self._secret(source.secret_namespace, source.secret_name),
            )
        if isinstance(source, CatalogSource):
            return Dependency(
                DependencyKind.MODEL_CATALOG_SOURCE,
                source.source_name,
                self._catalog_source(source.source_name),
            )
        return None

    def _secret(self, namespace: str, name: str) -> str:
        try:
            secret = self._secrets.read(namespace, name)
        except KubeError as error:
            if not error.forbidden:
                raise
            # Not granted yet (D160): no version to see, as for a missing Secret; once the grant
            # comes, the version read differs and the Model is tried again at once.
            return ""
        return secret.resource_version if secret is not None else ""

    def _catalog_source(self, name: str) -> str:
        found = self._sources.get(name)
        return str(((found or {}).get("metadata") or {}).get("resourceVersion") or "")
