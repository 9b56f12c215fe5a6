"""Mutating admission webhooks, as the apiserver calls them: real HTTPS webhook servers on
127.0.0.1 (port 0, their own self-signed CA given as caBundle) receive AdmissionReview v1 requests
for CREATE and UPDATE; their JSON patches, refusals, timeouts and outages act on the write; the
configuration objects are defaulted and validated on write."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubeemu.pytest_fixtures import RunningEmulator
from kubeemu.tlscert import self_signed
from support.webhook_listener import Responder, WebhookListener

SERVICE_NAMESPACE, SERVICE_NAME = "webhooks", "hook"
SERVICE_HOST = f"{SERVICE_NAME}.{SERVICE_NAMESPACE}.svc"
MWC_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def allow(request: dict[str, Any], patch: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
    if patch is not None:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return response


def add_label(key: str, value: str) -> Responder:
    """Adds metadata.labels[key] = value (creating labels when absent)."""

    def respond(request: dict[str, Any]) -> dict[str, Any]:
        labels = (request["object"].get("metadata") or {}).get("labels")
        if labels is None:
            return allow(request, [{"op": "add", "path": "/metadata/labels", "value": {key: value}}])
        return allow(request, [{"op": "add", "path": f"/metadata/labels/{key}", "value": value}])

    return respond


class WebhookServer(WebhookListener):
    """An HTTPS admission webhook on 127.0.0.1 (port 0) with its own CA; records every review."""

    def __init__(
        self, workdir: Path, respond: Responder, *, hosts: tuple[str, ...] = (SERVICE_HOST,)
    ) -> None:
        certificate = self_signed(hosts=(*hosts, "127.0.0.1"))
        cert_file, key_file = certificate.write(workdir)
        self.ca_bundle = base64.b64encode(certificate.cert_pem.encode()).decode()
        self.release = threading.Event()  # lets a deliberately slow responder return
        super().__init__(cert_file=cert_file, key_file=key_file, respond=respond)

    @property
    def requests(self) -> list[dict[str, Any]]:
        return [review["request"] for review in self.reviews]

    def close(self) -> None:
        self.release.set()
        super().close()


@pytest.fixture
def webhook_servers(tmp_path: Path) -> Iterator[Callable[..., WebhookServer]]:
    started: list[WebhookServer] = []

    def start(respond: Responder, **kwargs: Any) -> WebhookServer:
        server = WebhookServer(tmp_path / f"webhook-{len(started)}", respond, **kwargs)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def webhook(
    server: WebhookServer | None,
    *,
    name: str = "label.example.test",
    resources: tuple[str, ...] = ("configmaps",),
    operations: tuple[str, ...] = ("CREATE", "UPDATE"),
    **fields: Any,
) -> dict[str, Any]:
    hook: dict[str, Any] = {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "clientConfig": {
            "service": {"namespace": SERVICE_NAMESPACE, "name": SERVICE_NAME, "path": "/mutate"},
            "caBundle": server.ca_bundle if server is not None else "",
        },
        "rules": [
            {
                "apiGroups": ["", "apps"],
                "apiVersions": ["v1"],
                "resources": list(resources),
                "operations": list(operations),
            }
        ],
    }
    hook.update(fields)
    return hook


def configure(emulator: RunningEmulator, name: str, *hooks: dict[str, Any]) -> dict[str, Any]:
    status, _, body = emulator.request(
        "POST",
        MWC_PATH,
        body={
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": list(hooks),
        },
    )
    assert status == 201, body
    stored: dict[str, Any] = body
    return stored


def route(emulator: RunningEmulator, server: WebhookServer) -> None:
    emulator.route_service(SERVICE_NAMESPACE, SERVICE_NAME, server.port)


def create_configmap(
    emulator: RunningEmulator,
    name: str,
    *,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    query: str = "",
) -> tuple[int, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    status, _, body = emulator.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/configmaps{query}",
        body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}},
    )
    return status, body


def labels_of(body: Any) -> dict[str, str]:
    labels: dict[str, str] = (body.get("metadata") or {}).get("labels") or {}
    return labels


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# --- patches ---------------------------------------------------------------------------------------


def test_a_webhook_patch_is_applied_before_storage_and_the_review_describes_the_create(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    server = webhook_servers(add_label("mutated", "yes"))
    route(emulator, server)
    configure(emulator, "labels", webhook(server))

    status, created = create_configmap(emulator, "c1")

    assert status == 201, created
    assert labels_of(created) == {"mutated": "yes"}
    _, _, stored = emulator.request("GET", f"{CONFIGMAPS}/c1")
    assert labels_of(stored) == {"mutated": "yes"}
    assert server.paths == ["/mutate?timeout=10s"]
    (review,) = server.reviews
    assert review["apiVersion"] == "admission.k8s.io/v1"
    assert review["kind"] == "AdmissionReview"
    request = review["request"]
    assert request["operation"] == "CREATE"
    assert request["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert request["requestKind"] == request["kind"]
    assert request["requestResource"] == request["resource"]
    assert "subResource" not in request
    assert (request["name"], request["namespace"]) == ("c1", "default")
    assert request["userInfo"]["username"] == emulator.superuser.name
    assert "system:authenticated" in request["userInfo"]["groups"]
    assert request["object"]["data"] == {"k": "v"}
    assert "uid" not in request["object"]["metadata"]
    assert request["oldObject"] is None
    assert request["dryRun"] is False
    assert request["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}


def test_an_update_and_a_patch_send_the_old_object_and_are_patched(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    server = webhook_servers(add_label("mutated", "yes"))
    route(emulator, server)
    create_configmap(emulator, "c1")  # before the configuration: not mutated
    configure(emulator, "labels", webhook(server))

    status, _, patched = emulator.request(
        "PATCH", f"{CONFIGMAPS}/c1", body={"data": {"k": "v2"}}, content_type="application/merge-patch+json"
    )
    assert status == 200, patched
    assert labels_of(patched) == {"mutated": "yes"}
    assert patched["data"] == {"k": "v2"}
    request = server.requests[-1]
    assert request["operation"] == "UPDATE"
    assert request["options"]["kind"] == "PatchOptions"
    assert request["oldObject"]["data"] == {"k": "v"}
    assert request["object"]["data"] == {"k": "v2"}
    assert "mutated" not in labels_of(request["oldObject"])

    body = dict(patched, data={"k": "v3"})
    body["metadata"] = dict(patched["metadata"], labels={})
    status, _, replaced = emulator.request("PUT", f"{CONFIGMAPS}/c1", body=body)
    assert status == 200, replaced
    assert labels_of(replaced) == {"mutated": "yes"}
    assert replaced["data"] == {"k": "v3"}
    assert server.requests[-1]["options"]["kind"] == "UpdateOptions"


def test_webhooks_run_in_configuration_name_order_each_seeing_the_previous_patch(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    def append(tag: str) -> Responder:
        def respond(request: dict[str, Any]) -> dict[str, Any]:
            seen = labels_of(request["object"]).get("order", "")
            return allow(request, [{"op": "add", "path": "/metadata/labels", "value": {"order": seen + tag}}])

        return respond

    first, second = webhook_servers(append("a")), webhook_servers(append("b"))
    second_url = {"url": f"https://127.0.0.1:{second.port}/mutate", "caBundle": second.ca_bundle}
    configure(emulator, "z-second", webhook(second, name="second.example.test", clientConfig=second_url))
    route(emulator, first)
    configure(emulator, "a-first", webhook(first, name="first.example.test"))

    status, created = create_configmap(emulator, "c1")

    assert status == 201, created
    assert labels_of(created) == {"order": "ab"}


def test_a_patched_custom_resource_is_pruned_defaulted_and_validated_after_the_webhook(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    def respond(request: dict[str, Any]) -> dict[str, Any]:
        size = 99 if request["object"]["metadata"]["name"] == "too-big" else 3
        return allow(
            request,
            [
                {"op": "add", "path": "/spec/size", "value": size},
                {"op": "add", "path": "/spec/unknownByTheSchema", "value": True},
            ],
        )

    server = webhook_servers(respond)
    route(emulator, server)
    configure(
        emulator,
        "widgets",
        webhook(
            server,
            rules=[
                {
                    "apiGroups": ["example.test"],
                    "apiVersions": ["*"],
                    "resources": ["widgets"],
                    "operations": ["*"],
                }
            ],
        ),
    )
    widgets = "/apis/example.test/v1/namespaces/default/widgets"

    def widget(name: str) -> dict[str, Any]:
        return {
            "apiVersion": "example.test/v1",
            "kind": "Widget",
            "metadata": {"name": name},
            "spec": {"source": {"url": "https://example.test/m"}},
        }

    status, _, created = emulator.request("POST", widgets, body=widget("fine"))
    assert status == 201, created
    assert created["spec"]["size"] == 3
    assert created["spec"]["mode"] == "Fast"
    assert "unknownByTheSchema" not in created["spec"]
    assert server.requests[0]["object"]["spec"]["mode"] == "Fast"  # the webhook saw the defaulted object

    status, _, refused = emulator.request("POST", widgets, body=widget("too-big"))
    assert status == 422, refused
    assert (
        "spec.size: Invalid value: 99: spec.size in body should be less than or equal to 10"
        in refused["message"]
    )


# --- refusals and failures -------------------------------------------------------------------------


def test_allowed_false_refuses_the_write_with_the_webhooks_message_and_code(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    def deny(request: dict[str, Any]) -> dict[str, Any]:
        return {
            "uid": request["uid"],
            "allowed": False,
            "status": {"code": 403, "reason": "Forbidden", "message": "configmaps need a ticket"},
        }

    server = webhook_servers(deny)
    route(emulator, server)
    configure(emulator, "deny", webhook(server, name="deny.example.test"))

    status, refused = create_configmap(emulator, "c1")

    assert status == 403
    assert refused["reason"] == "Forbidden"
    assert (
        refused["message"]
        == 'admission webhook "deny.example.test" denied the request: configmaps need a ticket'
    )
    assert emulator.request("GET", f"{CONFIGMAPS}/c1")[0] == 404


def test_a_refusal_without_a_status_is_a_400_without_explanation(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    server = webhook_servers(lambda request: {"uid": request["uid"], "allowed": False})
    route(emulator, server)
    configure(emulator, "deny", webhook(server, name="deny.example.test"))

    status, refused = create_configmap(emulator, "c1")

    assert status == 400
    assert (
        refused["message"] == 'admission webhook "deny.example.test" denied the request without explanation'
    )


def test_an_unreachable_webhook_refuses_with_fail_and_admits_with_ignore(emulator: RunningEmulator) -> None:
    emulator.route_service(SERVICE_NAMESPACE, SERVICE_NAME, closed_port())
    configure(emulator, "closed", webhook(None, name="closed.example.test"))

    status, refused = create_configmap(emulator, "c1")

    assert status == 500, refused
    assert refused["reason"] == "InternalError"
    assert refused["message"].startswith(
        'Internal error occurred: failed calling webhook "closed.example.test": failed to call webhook: '
        f'Post "https://{SERVICE_HOST}:443/mutate?timeout=10s": '
    )
    assert "connect" in refused["message"]
    assert emulator.request("GET", f"{CONFIGMAPS}/c1")[0] == 404

    emulator.request("DELETE", f"{MWC_PATH}/closed")
    configure(emulator, "closed", webhook(None, name="closed.example.test", failurePolicy="Ignore"))
    status, created = create_configmap(emulator, "c1")
    assert status == 201, created
    assert labels_of(created) == {}


def test_a_service_without_a_route_is_a_failed_call_that_names_the_fix(emulator: RunningEmulator) -> None:
    configure(emulator, "unrouted", webhook(None, name="unrouted.example.test"))

    status, refused = create_configmap(emulator, "c1")

    assert status == 500
    assert f'service "{SERVICE_NAMESPACE}/{SERVICE_NAME}" has no route in the emulator' in refused["message"]
    assert "route_service(" in refused["message"]


def test_a_webhook_slower_than_its_timeout_counts_as_unreachable(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    def slow(request: dict[str, Any]) -> dict[str, Any]:
        server.release.wait(timeout=60)  # answers only when the test ends
        return allow(request, [{"op": "add", "path": "/metadata/labels", "value": {"late": "yes"}}])

    server = webhook_servers(slow)
    route(emulator, server)
    configure(emulator, "slow", webhook(server, name="slow.example.test", timeoutSeconds=1))

    started = time.monotonic()
    status, refused = create_configmap(emulator, "c1")
    assert status == 500, refused
    assert refused["message"] == (
        'Internal error occurred: failed calling webhook "slow.example.test": failed to call webhook: '
        f'Post "https://{SERVICE_HOST}:443/mutate?timeout=1s": context deadline exceeded'
    )
    assert time.monotonic() - started < 10

    emulator.request("DELETE", f"{MWC_PATH}/slow")
    configure(
        emulator, "slow", webhook(server, name="slow.example.test", timeoutSeconds=1, failurePolicy="Ignore")
    )
    status, created = create_configmap(emulator, "c2")
    assert status == 201, created
    assert labels_of(created) == {}


def test_the_ca_bundle_is_the_trust_root_and_the_certificate_must_name_the_service(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    wrong_host = webhook_servers(add_label("mutated", "yes"), hosts=("other.webhooks.svc",))
    trusted = webhook_servers(add_label("mutated", "yes"))
    route(emulator, wrong_host)
    configure(emulator, "tls", webhook(wrong_host, name="tls.example.test"))

    status, refused = create_configmap(emulator, "c1")
    assert status == 500, refused
    assert "tls: failed to verify certificate" in refused["message"]

    route(emulator, trusted)  # the right host name, but caBundle is still wrong_host's CA
    status, refused = create_configmap(emulator, "c1")
    assert status == 500, refused
    assert "tls: failed to verify certificate" in refused["message"]
    assert trusted.reviews == []


def test_an_invalid_response_is_a_failed_call(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    server = webhook_servers(lambda request: {"uid": "not-the-request", "allowed": True})
    route(emulator, server)
    configure(emulator, "bad", webhook(server, name="bad.example.test"))

    status, refused = create_configmap(emulator, "c1")

    assert status == 500
    assert 'received invalid webhook response: expected response.uid="' in refused["message"]


# --- which requests reach a webhook ----------------------------------------------------------------


def test_a_match_condition_limits_the_calls(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    server = webhook_servers(add_label("mutated", "yes"))
    route(emulator, server)
    condition = {
        "name": "annotated",
        "expression": (
            "has(object.metadata.annotations) && 'example.test/hook' in object.metadata.annotations"
        ),
    }
    configure(emulator, "conditional", webhook(server, matchConditions=[condition]))

    _, plain = create_configmap(emulator, "plain")
    _, annotated = create_configmap(emulator, "annotated", annotations={"example.test/hook": "1"})

    assert labels_of(plain) == {}
    assert labels_of(annotated) == {"mutated": "yes"}
    assert [r["name"] for r in server.requests] == ["annotated"]


def test_a_match_condition_that_fails_to_evaluate_applies_the_failure_policy(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    server = webhook_servers(add_label("mutated", "yes"))
    route(emulator, server)
    condition = {"name": "broken", "expression": "object.metadata.annotations['missing'] == 'x'"}
    configure(emulator, "broken", webhook(server, name="broken.example.test", matchConditions=[condition]))

    status, refused = create_configmap(emulator, "c1")
    assert status == 500, refused
    assert (
        'failed calling webhook "broken.example.test": failed to evaluate match conditions'
        in refused["message"]
    )

    emulator.request("DELETE", f"{MWC_PATH}/broken")
    ignoring = webhook(
        server, name="broken.example.test", matchConditions=[condition], failurePolicy="Ignore"
    )
    configure(emulator, "broken", ignoring)
    status, created = create_configmap(emulator, "c1")
    assert status == 201
    assert labels_of(created) == {}
    assert server.reviews == []


def test_object_selector_matches_the_new_or_the_old_labels(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    server = webhook_servers(add_label("mutated", "yes"))
    route(emulator, server)
    configure(emulator, "selected", webhook(server, objectSelector={"matchLabels": {"pick": "me"}}))

    _, other = create_configmap(emulator, "other", labels={"pick": "not-me"})
    _, picked = create_configmap(emulator, "picked", labels={"pick": "me"})
    assert labels_of(other) == {"pick": "not-me"}
    assert labels_of(picked) == {"pick": "me", "mutated": "yes"}

    # An update that removes the label still matches through the old object.
    body = dict(picked)
    body["metadata"] = dict(picked["metadata"], labels={})
    status, _, updated = emulator.request("PUT", f"{CONFIGMAPS}/picked", body=body)
    assert status == 200, updated
    assert labels_of(updated) == {"mutated": "yes"}
    assert [r["name"] for r in server.requests] == ["picked", "picked"]


def test_namespace_selector_matches_the_labels_of_the_objects_namespace(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    server = webhook_servers(add_label("mutated", "yes"))
    route(emulator, server)
    for name, labels in (("hooked", {"hooks": "on"}), ("quiet", {})):
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
        assert emulator.request("POST", "/api/v1/namespaces", body=namespace)[0] == 201
    selector = {"matchExpressions": [{"key": "hooks", "operator": "In", "values": ["on"]}]}
    configure(emulator, "namespaced", webhook(server, namespaceSelector=selector))

    _, hooked = create_configmap(emulator, "c1", namespace="hooked")
    _, quiet = create_configmap(emulator, "c1", namespace="quiet")

    assert labels_of(hooked) == {"mutated": "yes"}
    assert labels_of(quiet) == {}
    assert [r["namespace"] for r in server.requests] == ["hooked"]


def test_rules_select_by_resource_and_operation(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    server = webhook_servers(add_label("mutated", "yes"))
    route(emulator, server)
    configure(emulator, "updates", webhook(server, resources=("configmaps",), operations=("UPDATE",)))

    _, created = create_configmap(emulator, "c1")
    assert labels_of(created) == {}  # CREATE is not in the rule
    status, _, secret = emulator.request(
        "POST",
        "/api/v1/namespaces/default/secrets",
        body={"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}},
    )
    assert status == 201
    assert labels_of(secret) == {}
    status, _, patched = emulator.request(
        "PATCH", f"{CONFIGMAPS}/c1", body={"data": {"k": "v2"}}, content_type="application/merge-patch+json"
    )
    assert status == 200
    assert labels_of(patched) == {"mutated": "yes"}
    assert [(r["operation"], r["resource"]["resource"]) for r in server.requests] == [
        ("UPDATE", "configmaps")
    ]


def test_a_resource_rule_without_a_subresource_does_not_match_status_writes(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    server = webhook_servers(allow)
    route(emulator, server)
    configure(emulator, "deployments", webhook(server, resources=("deployments",)))
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "a", "image": "x"}]},
            },
        },
    }
    deployments = "/apis/apps/v1/namespaces/default/deployments"
    assert emulator.request("POST", deployments, body=deployment)[0] == 201
    status, _, _ = emulator.request(
        "PATCH",
        f"{deployments}/web/status",
        body={"status": {"replicas": 1}},
        content_type="application/merge-patch+json",
    )
    assert status == 200
    configure(
        emulator, "status", webhook(server, name="status.example.test", resources=("deployments/status",))
    )
    emulator.request(
        "PATCH",
        f"{deployments}/web/status",
        body={"status": {"replicas": 2}},
        content_type="application/merge-patch+json",
    )
    assert [(r["operation"], r.get("subResource")) for r in server.requests] == [
        ("CREATE", None),
        ("UPDATE", "status"),
    ]


def test_a_dry_run_write_reaches_the_webhook_as_dry_run_and_stores_nothing(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    server = webhook_servers(add_label("mutated", "yes"))
    route(emulator, server)
    configure(emulator, "labels", webhook(server, sideEffects="NoneOnDryRun"))

    status, answered = create_configmap(emulator, "c1", query="?dryRun=All")

    assert status == 201
    assert labels_of(answered) == {"mutated": "yes"}
    assert server.requests[0]["dryRun"] is True
    assert server.requests[0]["options"]["dryRun"] == ["All"]
    assert emulator.request("GET", f"{CONFIGMAPS}/c1")[0] == 404


def test_the_object_changing_while_a_webhook_runs_redoes_the_update_without_holding_the_store(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    """The webhook writes the same object in-process during its first call; that write needs the
    store lock (it would hang if the emulator held it), and the admitted patch is redone."""
    calls: list[int] = []

    def respond(request: dict[str, Any]) -> dict[str, Any]:
        calls.append(1)
        if len(calls) == 1:
            current = emulator.request("GET", f"{CONFIGMAPS}/c1")[2]
            current["data"]["other"] = "writer"
            emulator.cluster.apply(current)
        return allow(request, [{"op": "add", "path": "/metadata/labels", "value": {"seen": str(len(calls))}}])

    create_configmap(emulator, "c1")
    server = webhook_servers(respond)
    route(emulator, server)
    configure(emulator, "racing", webhook(server, operations=("UPDATE",)))

    status, _, patched = emulator.request(
        "PATCH", f"{CONFIGMAPS}/c1", body={"data": {"k": "v2"}}, content_type="application/merge-patch+json"
    )

    assert status == 200, patched
    assert patched["data"] == {"k": "v2", "other": "writer"}
    assert labels_of(patched) == {"seen": "2"}
    assert server.requests[1]["oldObject"]["data"]["other"] == "writer"


def test_kubectl_apply_of_a_deployment_is_patched(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    def gate(request: dict[str, Any]) -> dict[str, Any]:
        return allow(
            request,
            [
                {
                    "op": "add",
                    "path": "/spec/template/spec/schedulingGates",
                    "value": [{"name": "example.test/gate"}],
                },
                {"op": "add", "path": "/metadata/annotations/example.test~1gated", "value": "true"},
            ],
        )

    server = webhook_servers(gate)
    route(emulator, server)
    configure(emulator, "gates", webhook(server, name="gate.example.test", resources=("deployments",)))
    manifest = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - {name: a, image: "one"}
"""

    applied = emulator.kubectl("apply", "-f", "-", input=manifest)

    assert "deployment.apps/web created" in applied.stdout
    gates = emulator.kubectl(
        "get", "deploy", "web", "-o", "jsonpath={.spec.template.spec.schedulingGates[*].name}"
    )
    assert gates.stdout == "example.test/gate"
    annotation = emulator.kubectl(
        "get", "deploy", "web", "-o", "jsonpath={.metadata.annotations.example\\.test/gated}"
    )
    assert annotation.stdout == "true"
    (request,) = server.requests
    assert request["operation"] == "CREATE"
    assert request["kind"]["kind"] == "Deployment"
    assert request["options"].get("fieldManager") == "kubectl-client-side-apply"


# --- the configuration objects ---------------------------------------------------------------------


def test_a_configuration_is_stored_with_the_apiservers_defaults(emulator: RunningEmulator) -> None:
    stored = configure(emulator, "defaults", webhook(None))
    (hook,) = stored["webhooks"]
    assert hook["failurePolicy"] == "Fail"
    assert hook["matchPolicy"] == "Equivalent"
    assert hook["timeoutSeconds"] == 10
    assert hook["reinvocationPolicy"] == "Never"
    assert hook["namespaceSelector"] == {}
    assert hook["objectSelector"] == {}
    assert hook["rules"][0]["scope"] == "*"
    assert hook["clientConfig"]["service"]["port"] == 443


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"sideEffects": None},
            "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
        ),
        (
            {"sideEffects": "Some"},
            'webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"',
        ),
        (
            {"timeoutSeconds": 31},
            "webhooks[0].timeoutSeconds: Invalid value: 31: "
            "the timeout value must be between 1 and 30 seconds",
        ),
        (
            {"name": "short.name"},
            'webhooks[0].name: Invalid value: "short.name": should be a domain with at least three segments '
            "separated by dots",
        ),
        (
            {"failurePolicy": "Sometimes"},
            'webhooks[0].failurePolicy: Unsupported value: "Sometimes": supported values: "Fail", "Ignore"',
        ),
        (
            {"admissionReviewVersions": []},
            "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
        ),
        (
            {"clientConfig": {}},
            "webhooks[0].clientConfig: Required value: exactly one of url or service is required",
        ),
        (
            {"clientConfig": {"url": "http://127.0.0.1:1/mutate"}},
            'webhooks[0].clientConfig.url: Invalid value: "http://127.0.0.1:1/mutate": '
            "'https' is the only allowed URL scheme",
        ),
        (
            {
                "rules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["GET"]}
                ]
            },
            'webhooks[0].rules[0].operations[0]: Unsupported value: "GET": supported values: '
            '"*", "CONNECT", "CREATE", "DELETE", "UPDATE"',
        ),
        (
            {"objectSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
            "webhooks[0].objectSelector.matchExpressions[0].values: Required value: must be specified when "
            "`operator` is 'In' or 'NotIn'",
        ),
        (
            {"matchConditions": [{"name": "c", "expression": "object.("}]},
            'webhooks[0].matchConditions[0].expression: Invalid value: "object.(": compilation failed: ',
        ),
    ],
)
def test_an_invalid_configuration_is_refused_with_the_apiservers_field_error(
    emulator: RunningEmulator, change: dict[str, Any], message: str
) -> None:
    hook = webhook(None)
    hook.update(change)
    hook = {k: v for k, v in hook.items() if v is not None}
    status, _, body = emulator.request(
        "POST",
        MWC_PATH,
        body={
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "bad"},
            "webhooks": [hook],
        },
    )
    assert status == 422, body
    prefix = 'MutatingWebhookConfiguration.admissionregistration.k8s.io "bad" is invalid: '
    assert body["message"].startswith(prefix + message), body["message"]


def test_writes_of_webhook_configurations_are_never_sent_to_webhooks(emulator: RunningEmulator) -> None:
    emulator.route_service(SERVICE_NAMESPACE, SERVICE_NAME, closed_port())
    everything = webhook(
        None,
        name="all.example.test",
        rules=[{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["*"]}],
    )
    configure(emulator, "everything", everything)

    configure(emulator, "another", webhook(None, name="another.example.test"))  # not refused
    assert emulator.request("DELETE", f"{MWC_PATH}/everything")[0] == 200
    status, _created = create_configmap(emulator, "c1")
    assert status == 500  # "another" still fails closed
    emulator.request("DELETE", f"{MWC_PATH}/another")
    assert create_configmap(emulator, "c1")[0] == 201


def test_response_warnings_reach_the_client_as_warning_headers(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    server = webhook_servers(lambda request: dict(allow(request), warnings=["label your configmaps"]))
    route(emulator, server)
    configure(emulator, "warns", webhook(server, name="warns.example.test"))

    status, headers, _ = emulator.request(
        "POST",
        CONFIGMAPS,
        body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}},
    )

    assert status == 201
    assert headers.get_all("Warning") == ['299 - "label your configmaps"']


def core_event(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "example.test/controller",
        "reportingInstance": "example",
        "action": "Test",
        "reason": "Tested",
        "type": "Normal",
        "regarding": {"kind": "ConfigMap", "namespace": "default", "name": "c1"},
        "note": "hello",
    }


@pytest.mark.parametrize("policy", ["Equivalent", "Exact"])
def test_match_policy_equivalent_reaches_a_webhook_through_another_api_of_the_same_resource(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer], policy: str
) -> None:
    server = webhook_servers(add_label("mutated", "yes"))
    route(emulator, server)
    configure(emulator, "events", webhook(server, resources=("events",), matchPolicy=policy))

    status, _, created = emulator.request(
        "POST", "/apis/events.k8s.io/v1/namespaces/default/events", body=core_event("e1")
    )

    assert status == 201, created
    if policy == "Exact":
        assert server.reviews == []
        assert labels_of(created) == {}
        return
    (request,) = server.requests
    assert request["kind"] == {"group": "", "version": "v1", "kind": "Event"}
    assert request["requestKind"] == {"group": "events.k8s.io", "version": "v1", "kind": "Event"}
    assert request["object"]["message"] == "hello"  # the core/v1 form of the object
    assert created["note"] == "hello"
    assert labels_of(created) == {"mutated": "yes"}


def test_server_side_apply_creates_and_updates_through_the_webhook(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    server = webhook_servers(add_label("mutated", "yes"))
    route(emulator, server)
    configure(emulator, "labels", webhook(server))
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c1, namespace: default}\ndata: {k: v}\n"

    emulator.kubectl("apply", "--server-side", "-f", "-", input=manifest)
    emulator.kubectl("apply", "--server-side", "-f", "-", input=manifest.replace("{k: v}", "{k: v2}"))

    _, _, stored = emulator.request("GET", f"{CONFIGMAPS}/c1")
    assert labels_of(stored) == {"mutated": "yes"}
    assert stored["data"] == {"k": "v2"}
    assert [(r["operation"], r["options"]["kind"]) for r in server.requests] == [
        ("CREATE", "PatchOptions"),
        ("UPDATE", "PatchOptions"),
    ]
    assert server.requests[1]["oldObject"]["data"] == {"k": "v"}


def test_running_emulator_apply_is_admitted_and_the_in_process_back_door_is_not(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    server = webhook_servers(add_label("mutated", "yes"))
    route(emulator, server)
    configure(emulator, "labels", webhook(server))

    def configmap(name: str, value: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"},
            "data": {"k": value},
        }

    created = emulator.apply(configmap("over-api", "v"))
    replaced = emulator.apply(configmap("over-api", "v2"))
    in_process = emulator.cluster.apply(configmap("in-process", "v"))

    assert labels_of(created) == {"mutated": "yes"}
    assert labels_of(replaced) == {"mutated": "yes"}
    assert replaced["data"] == {"k": "v2"}
    assert labels_of(in_process) == {}
    # The second apply's create is admitted before storage finds the name taken, as on the apiserver.
    assert [(r["operation"], r["name"]) for r in server.requests] == [
        ("CREATE", "over-api"),
        ("CREATE", "over-api"),
        ("UPDATE", "over-api"),
    ]


def test_a_namespace_is_matched_by_its_own_labels_and_cluster_scope(
    emulator: RunningEmulator, webhook_servers: Callable[..., WebhookServer]
) -> None:
    server = webhook_servers(add_label("mutated", "yes"))
    route(emulator, server)
    cluster_scoped = [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["namespaces"],
            "operations": ["CREATE"],
            "scope": "Cluster",
        }
    ]
    selector = {"matchLabels": {"team": "a"}}
    configure(emulator, "namespaces", webhook(server, rules=cluster_scoped, namespaceSelector=selector))

    for name, labels in (("team-a", {"team": "a"}), ("team-b", {"team": "b"})):
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
        assert emulator.request("POST", "/api/v1/namespaces", body=namespace)[0] == 201

    assert [(r["name"], r["namespace"]) for r in server.requests] == [("team-a", "team-a")]
    assert labels_of(emulator.request("GET", "/api/v1/namespaces/team-a")[2]) == {
        "team": "a",
        "mutated": "yes",
    }
    namespaced_only = [dict(cluster_scoped[0], scope="Namespaced")]
    emulator.request("DELETE", f"{MWC_PATH}/namespaces")
    configure(emulator, "namespaces", webhook(server, rules=namespaced_only))
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-c"}}
    assert emulator.request("POST", "/api/v1/namespaces", body=namespace)[0] == 201
    assert len(server.requests) == 1  # a Namespace is cluster-scoped
