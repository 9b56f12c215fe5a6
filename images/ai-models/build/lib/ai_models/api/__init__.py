"""The api process: the public catalog-import API (contract: `openapi/catalog-import.yaml`).

- `models`: the contract's shapes (pydantic), checked against the document by the tests;
  `contract`: loads the document, served verbatim at `/openapi.json`.
- `app`: the FastAPI app (routes, problem responses, request metrics); `routes_catalog`: search,
  sources, entry; `routes_service`: contract and probes.
- `auth`: bearer token -> TokenReview -> SubjectAccessReview, cached.
- `catalog`: page and entry assembly; `paging`: keyset page tokens.
- `index`: the local SQLite/FTS5 index; `index_builder`: keeps it equal to the object store.
- `ledger_view`: ledger snapshot (at most 5 s old, single flight); `verdicts`: memoised verdicts.
- `metrics`: Prometheus metrics and their listener; `settings`: the api's settings.
- `server`: `serve(settings, host=..., port=...)`, the process.
"""
