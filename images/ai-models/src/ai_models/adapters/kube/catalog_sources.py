"""ModelCatalogSources as the controller asks about them: every name, one name for sure, one source
as it is now, and the two writes of its reconciler (metadata, status).

The list says which catalog indexes have an owner; the single GET confirms an absence before
anything is withdrawn or removed, because a list can come back short by mistake (a cache, a
proxy, an API server restored from an old backup) and a GET of one name cannot. A failure raises
`KubeError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.objects import Objects
from ai_models.adapters.kube.resources import MODEL_CATALOG_SOURCES


class CatalogSourceObjects:
    def __init__(self, api_client: Any) -> None:
        self._sources = Objects(api_client, MODEL_CATALOG_SOURCES)

    def names(self) -> set[str]:
        """The name of every ModelCatalogSource, deleting ones included; raises on any failure."""
        return {str(item["metadata"]["name"]) for item in self._sources.list_all()}

    def exists(self, name: str) -> bool:
        """Whether the API server has the source now (404: no); raises on any other failure."""
        return self.get(name) is not None

    def get(self, name: str) -> dict[str, Any] | None:
        """The source as the API server has it now; None when there is none of that name."""
        return self._sources.get(name)

    def patch(self, name: str, patch: Mapping[str, Any], *, status: bool = False) -> dict[str, Any]:
        """Merge `patch` into the source (into its status subresource with `status`); the source as
        written. A source gone meanwhile raises (`KubeError.not_found`)."""
        patched = self._sources.patch(name, patch, subresource="status" if status else None)
        if patched is None:  # only a patch with missing_ok answers None; kept for the type checker
            kind = MODEL_CATALOG_SOURCES.kind
            raise KubeError(verb="patch", kind=kind, name=name, namespace="", status=404)
        return patched
