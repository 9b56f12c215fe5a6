"""The api process and its four APIs, each with a contract under `openapi/`:

- catalog-import (`catalog-import.yaml`): search, sources, entries, the storage summary;
- upload (`upload.yaml`): one streaming PUT per upload URL;
- serving (`serving.yaml`): manifests and files of Ready Models and ClusterModels;
- internal lookup (`internal-lookup.yaml`): served only on the internal TLS listener.

- `models`, `models_upload`, `models_serving`, `models_lookup`: the contracts' shapes (pydantic),
  checked against the documents by the tests; `contract`: loads the documents, each served verbatim.
- `app`: the public and the internal FastAPI apps (problem responses, request metrics);
  `routes_catalog`, `routes_upload`, `routes_serving`, `routes_lookup`, `routes_service`: operations.
- `auth`: bearer token -> TokenReview -> SubjectAccessReview for an `Access`, cached;
  `kube_calls`: Kubernetes failures as problems; `model_objects`: Models and ClusterModels read.
- `catalog`: page and entry assembly; `paging`: keyset page tokens.
- `index`: the local SQLite/FTS5 index; `index_builder`: keeps it equal to the object store.
- `ledger_view`: ledger snapshot (at most 5 s old, single flight) shared by `verdicts` (memoised
  download verdicts) and `storage_summary`.
- `uploads`: receiving an upload; `signing_keys`: the upload token key; `upload_ledger`: the
  upload's reservation; `body_pipe`: request bodies from the event loop to a store thread.
- `serving`: manifest and file answers; `ranges`: HTTP ranges and conditions; `lookup`: the
  lookup answer.
- `metrics`: Prometheus metrics and their listener; `settings`: the api's settings.
- `server`: `serve(settings, host=..., port=...)`, the process with its two listeners.
"""
