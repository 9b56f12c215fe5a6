"""The api process and its four APIs, each with a contract under `openapi/` and a sub-package:

- catalog-import (`catalog-import.yaml`, `catalog/`): search, sources, entries, the storage summary;
- upload (`upload.yaml`, `upload/`): one streaming PUT per upload URL;
- serving (`serving.yaml`, `serving/`): manifests and files of Ready Models and ClusterModels;
- internal lookup (`internal-lookup.yaml`, `lookup/`): served only on the internal TLS listener.

Each sub-package holds its operations (`routes`) and what only that API uses. What two or more
share stays here:

- `models`, `models_serving`, `models_lookup` (and `upload.models`): the contracts' shapes
  (pydantic), checked against the documents by the tests; `contract`: loads the documents, each
  served verbatim.
- `app`: the public and the internal FastAPI apps (problem responses, request metrics);
  `routes_service`: the contract documents and the probes; `state`: what the routes answer from.
- `auth`: bearer token -> TokenReview -> SubjectAccessReview for an `Access`, cached (`adapters.ttl_cache`);
  `kube_calls`: Kubernetes failures as problems; `model_objects`: Models and ClusterModels read;
  `problems`: the problem responses.
- `catalog.catalog`: page and entry assembly; `catalog.paging`: keyset page tokens; `catalog.index`: the
  local SQLite/FTS5 index; `catalog.index_builder`: keeps it equal to the object store;
  `catalog.ledger_view`: ledger snapshot (at most 5 s old, single flight) shared by
  `catalog.verdicts` (memoised download verdicts) and `catalog.storage_summary`.
- `upload.uploads`: receiving an upload; `signing_keys`: the upload and delivery token keys;
  `upload.ledger`: the upload's reservation; `upload.body_pipe`: request bodies from the event loop
  to a store thread.
- `serving.serving`: manifest and file answers; `serving.ranges`: HTTP ranges and conditions;
  `lookup.lookup`: the lookup answer.
- `metrics`: Prometheus metrics and their listener; `settings`: the api's settings;
  `connections`: uvicorn's protocol with the limits a public listener needs.
- `server`: `serve(settings, host=..., port=...)`, the process with its two listeners.
"""
