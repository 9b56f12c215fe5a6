"""ModelCatalogSources as the inventory pass asks about them: every name, and one name for sure.

The list says which catalog indexes have an owner; the single GET confirms an absence before
anything is withdrawn or removed, because a list can come back short by mistake (a cache, a
proxy, an API server restored from an old backup) and a GET of one name cannot.
"""

from __future__ import annotations

from typing import Any, Final

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from ai_models.names import API_GROUP, API_VERSION, Plural

PAGE_SIZE: Final = 500


class CatalogSourceObjects:
    def __init__(self, api_client: Any, *, timeout: tuple[float, float] = (3, 30)) -> None:
        self._objects = k8s.CustomObjectsApi(api_client)
        self._timeout = timeout

    def names(self) -> set[str]:
        """The name of every ModelCatalogSource, deleting ones included; raises on any failure."""
        found: set[str] = set()
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": PAGE_SIZE, "_request_timeout": self._timeout}
            if token:
                kwargs["_continue"] = token
            page = self._objects.list_cluster_custom_object(
                API_GROUP, API_VERSION, Plural.MODEL_CATALOG_SOURCES, **kwargs
            )
            found.update(str(item["metadata"]["name"]) for item in page.get("items") or ())
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return found

    def exists(self, name: str) -> bool:
        """Whether the API server has the source now (404: no); raises on any other failure."""
        try:
            self._objects.get_cluster_custom_object(
                API_GROUP, API_VERSION, Plural.MODEL_CATALOG_SOURCES, name, _request_timeout=self._timeout
            )
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        return True
