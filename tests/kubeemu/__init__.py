"""kubeemu: the project's Kubernetes API emulator (a test tool, not product).

A generic API server: it knows Kubernetes, not this repository's module (a test asserts it names
nothing of it). What plays cluster controllers for the module (running its Jobs, ...) is the test
bed beside it (`tests/testbed`), which uses this package and is never imported by it.

An aiohttp server that behaves like a Kubernetes 1.34 apiserver for the official `kubernetes`
client and kubectl 1.36: discovery (legacy and aggregated), OpenAPI v3, CRUD with
resourceVersion/generation/finalizer/GC semantics, all patch types, watches, Tables, RBAC with
token identities, review APIs, CRDs enforced like the apiserver (structural schemas, pruning,
defaulting, OpenAPI validation and CEL), and mutating admission webhooks called over HTTPS for
CREATE and UPDATE requests (`kubeemu.admission`; a Service a webhook names is routed to a local
port with `EmulatorServer.route_service`). It serves HTTPS on 127.0.0.1 with a throwaway self-signed
certificate because kubectl never sends tokens to a plain-HTTP server.

Layout (lower modules never import higher ones):
- errors, jsonutil, clock, selectors, jsonpath       small shared pieces
- resources, builtin_resources, builtin_schemas       what is served (built-ins + CRD types)
- store                                               objects, resourceVersion counter, event log, watches
- patching, conversion, metavalidation, crds,
  webhookconfig                                       write-path building blocks
- crdvalidation/                                      CRD schemas: structural, prune/default, OpenAPI, CEL
- authn, authz, reviews                               identities, RBAC, review APIs
- cluster                                             the apiserver's object semantics, HTTP-free
- requestinfo, discovery, openapi, tables, watch,
  protobuf, admission, handlers                       the HTTP front
- tlscert, kubeconfig, server, __main__               serving and client configuration
- pytest_fixtures                                     test-suite fixtures

Entry points: `python -m kubeemu --crds DIR --kubeconfig PATH` (standalone),
`kubeemu.pytest_fixtures` (fixtures for test suites),
`kubeemu.server.EmulatorServer` (in-process), `kubeemu.crdvalidation` (CRD checks without a server).
"""
