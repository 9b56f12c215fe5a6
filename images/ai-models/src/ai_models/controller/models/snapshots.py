"""The Hub listing the controller plans publications from (one request per publication)."""

from __future__ import annotations

from ai_models.adapters.hub.repository import RepositorySnapshot, repository_snapshot


def hub_snapshot(endpoint: str, token: str | None, repository: str, revision: str) -> RepositorySnapshot:
    return repository_snapshot(repository, revision, endpoint=endpoint, token=token)
