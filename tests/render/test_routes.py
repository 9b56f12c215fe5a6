"""The public routes of the api (templates/routes): the Ingresses always, and a ListenerSet and
HTTPRoutes on the resolved Gateway next to them when the Gateway API is used, each Ingress sharing
its `app` label with the HTTPRoutes that serve its paths; TLS per HTTPS mode (a Secret per side from
cert-manager, one shared copy of a custom certificate); the upload entry point without a body size
limit and with long timeouts; nothing without publicDomainTemplate.

Expectations are derived from the scenario's values (the module settings and Deckhouse's global
values), never read back from the templates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from functools import cache
from typing import Any

import pytest

from support.manifest_schemas import validate_object
from support.paths import DOCS_DIR
from support.render import RenderedChart
from support.scenarios import Scenario, load_scenarios, scenario
from support.values import deep_merge

NAMESPACE = "d8-ai-models"
API_SERVICE = "ai-models-api"
GATEWAY_GROUP = "gateway.networking.k8s.io"
ROUTE_KINDS = ("ListenerSet", "HTTPRoute", "Ingress", "Certificate")
GATEWAY_KINDS = (f"{GATEWAY_GROUP}/v1/ListenerSet", f"{GATEWAY_GROUP}/v1/HTTPRoute")
CATALOG, SERVING, UPLOAD = "/api/catalog-import/v1", "/api/serving/v1", "/api/upload/v1"
CONTRACT = "/openapi.json"
# Entry point -> the paths it must reach, for each route object.
HTTP_ROUTES = {
    "ai-models-catalog": {CATALOG, CONTRACT},
    "ai-models-serving": {SERVING},
    "ai-models-upload": {UPLOAD},
}
INGRESSES = {"ai-models": {CATALOG, CONTRACT, SERVING}, "ai-models-upload": {UPLOAD}}
# The `app` label each entry point carries: an Ingress and the HTTPRoutes serving its paths share it.
APPS = {
    "ai-models": "ai-models",
    "ai-models-catalog": "ai-models",
    "ai-models-serving": "ai-models",
    "ai-models-upload": "ai-models-upload",
}
# TLS Secrets per the lib-helm convention: the Ingress side uses one prefix, the Gateway side two.
INGRESS_TLS, HTTPROUTE_TLS = "ai-models-ingress-tls", "ai-models-httproute-tls"
CUSTOM_TLS = f"{INGRESS_TLS}-customcertificate"
BODY_SIZE = "nginx.ingress.kubernetes.io/proxy-body-size"
LONG_TIMEOUT_SECONDS = 3600
SCENARIOS = load_scenarios()


@cache
def rendered(name: str) -> RenderedChart:
    return scenario(name).render()


def ids(item: Scenario) -> str:
    return item.name


# ----- what the values say ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Publishing:
    """How one scenario's values publish the api."""

    published: bool
    gateway_side: bool
    host: str
    mode: str
    ingress_class: str
    gateway: Mapping[str, str]
    issuer: str

    @property
    def tls(self) -> bool:
        return self.mode in ("CertManager", "CustomCertificate")

    @property
    def scheme(self) -> str:
        return "http" if self.mode == "Disabled" else "https"

    @property
    def ingress_secret(self) -> str | None:
        return {"CertManager": INGRESS_TLS, "CustomCertificate": CUSTOM_TLS}.get(self.mode)

    @property
    def gateway_secret(self) -> str | None:
        """The Gateway side's own cert-manager Secret, or the one shared custom certificate copy."""
        return {"CertManager": HTTPROUTE_TLS, "CustomCertificate": CUSTOM_TLS}.get(self.mode)

    @property
    def secrets_in_use(self) -> set[str]:
        used = {self.ingress_secret} | ({self.gateway_secret} if self.gateway_side else set())
        return {secret for secret in used if secret}

    @classmethod
    def of(cls, item: Scenario) -> Publishing:
        values = item.values()
        module, global_ = values["aiModels"], values["global"]
        modules = global_.get("modules") or {}
        discovery = global_.get("discovery") or {}
        module_https = module.get("https") or {}
        mode = module_https.get("mode") or (modules.get("https") or {}).get("mode") or ""
        issuer_source = module_https if module_https.get("mode") else {}
        issuer = (issuer_source.get("certManager") or {}).get("clusterIssuerName") or (
            (modules.get("https") or {}).get("certManager") or {}
        ).get("clusterIssuerName", "")
        gateway: Mapping[str, str] = {}
        for candidate in (
            (module.get("gatewayAPI") or {}).get("gateway") or {},
            (modules.get("gatewayAPI") or {}).get("gateway") or {},
            discovery.get("gatewayAPIDefaultGateway") or {},
        ):
            if candidate.get("name") and candidate.get("namespace"):
                gateway = {"name": candidate["name"], "namespace": candidate["namespace"]}
                break
        module_gateway_api = module.get("gatewayAPI") or {}
        enabled = module_gateway_api.get("enabled", (modules.get("gatewayAPI") or {}).get("enabled", True))
        served = all(kind in item.api_versions for kind in GATEWAY_KINDS)
        template = modules.get("publicDomainTemplate") or ""
        return cls(
            published=bool(template),
            gateway_side=bool(template and enabled and gateway and served),
            host=template.replace("%s", "ai-models"),
            mode=mode,
            ingress_class=module.get("ingressClass") or modules.get("ingressClass", ""),
            gateway=gateway,
            issuer=issuer,
        )


def route_objects(chart: RenderedChart) -> list[dict[str, Any]]:
    objects = [obj for obj in chart.objects if obj.get("kind") in ROUTE_KINDS]
    return objects + [
        obj for obj in chart.of_kind("Secret") if obj["metadata"]["name"].endswith("-customcertificate")
    ]


def tls_secrets(chart: RenderedChart) -> set[str]:
    """Secrets the chart makes exist: issued by a rendered Certificate or copied as a Secret."""
    issued = {obj["spec"]["secretName"] for obj in chart.of_kind("Certificate")}
    copied = {
        obj["metadata"]["name"] for obj in chart.of_kind("Secret") if obj.get("type") == "kubernetes.io/tls"
    }
    return issued | copied


def tls_secrets_in_use(chart: RenderedChart) -> set[str]:
    """Secrets the Ingresses and the ListenerSet's listeners terminate TLS with."""
    by_ingresses = {
        tls["secretName"] for ingress in chart.of_kind("Ingress") for tls in ingress["spec"].get("tls", [])
    }
    by_listeners = {
        ref["name"]
        for obj in chart.of_kind("ListenerSet")
        for listener in obj["spec"]["listeners"]
        for ref in (listener.get("tls") or {}).get("certificateRefs", [])
    }
    return by_ingresses | by_listeners


def http_route_paths(route: Mapping[str, Any]) -> set[str]:
    return {match["path"]["value"] for rule in route["spec"]["rules"] for match in rule["matches"]}


def ingress_paths(ingress: Mapping[str, Any]) -> set[str]:
    return {path["path"] for rule in ingress["spec"]["rules"] for path in rule["http"]["paths"]}


def upload_env(chart: RenderedChart) -> str | None:
    deployment = chart.get("Deployment", "ai-models-controller", NAMESPACE)
    (controller,) = [
        c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "controller"
    ]
    env = {item["name"]: item.get("value") for item in controller["env"]}
    value = env.get("AI_MODELS_UPLOAD_PUBLIC_URL")
    return None if value is None else str(value)


def without_public_domain(item: Scenario) -> Scenario:
    overrides = deep_merge(item.global_overrides, {"modules": {"publicDomainTemplate": None}})
    return dataclasses.replace(item, name=f"{item.name}-no-domain", global_overrides=overrides)


# ----- the scenarios cover the situations -------------------------------------------------------


def test_the_scenarios_cover_each_way_of_publishing() -> None:
    publishing = [Publishing.of(item) for item in SCENARIOS]
    assert {"routes-gateway", "routes-ingress-certmanager", "routes-custom-certificate"} <= {
        item.name for item in SCENARIOS
    }
    for gateway_side in (True, False):
        modes = {p.mode for p in publishing if p.published and p.gateway_side == gateway_side}
        assert {"CertManager", "CustomCertificate", "OnlyInURI"} <= modes, gateway_side
    assert any(p.published and not p.gateway_side and p.mode == "Disabled" for p in publishing)
    # The Gateway API served and a Gateway resolved, but the module turned the Gateway API off.
    off = Publishing.of(scenario("routes-ingress-certmanager"))
    assert off.gateway
    assert not off.gateway_side


# ----- per scenario ------------------------------------------------------------------------------


@pytest.mark.parametrize("item", SCENARIOS, ids=ids)
def test_ingresses_always_render_and_the_gateway_routes_next_to_them(item: Scenario) -> None:
    chart, expected = rendered(item.name), Publishing.of(item)
    assert expected.published, f"{item.name}: every committed scenario publishes the api"
    listener_sets, routes, ingresses = (
        chart.of_kind(kind) for kind in ("ListenerSet", "HTTPRoute", "Ingress")
    )
    assert sorted(obj["metadata"]["name"] for obj in ingresses) == sorted(INGRESSES)
    if expected.gateway_side:
        assert [obj["metadata"]["name"] for obj in listener_sets] == ["ai-models"]
        assert sorted(obj["metadata"]["name"] for obj in routes) == sorted(HTTP_ROUTES)
    else:
        assert listener_sets == []
        assert routes == []


@pytest.mark.parametrize("item", SCENARIOS, ids=ids)
def test_each_ingress_shares_its_app_with_http_routes_on_the_listener_set(item: Scenario) -> None:
    """DMT httproute-rules: an Ingress has an `app` label, and HTTPRoutes with the same label hang on
    the ListenerSet the module renders; here they also serve exactly the Ingress's paths."""
    chart, expected = rendered(item.name), Publishing.of(item)
    listener_sets = {
        (obj["metadata"]["namespace"], obj["metadata"]["name"]) for obj in chart.of_kind("ListenerSet")
    }
    routes_by_app: dict[str, list[dict[str, Any]]] = {}
    for route in chart.of_kind("HTTPRoute"):
        routes_by_app.setdefault(route["metadata"]["labels"]["app"], []).append(route)
    ingress_apps: set[str] = set()
    for ingress in chart.of_kind("Ingress"):
        name, app = ingress["metadata"]["name"], ingress["metadata"]["labels"]["app"]
        assert app == APPS[name]
        ingress_apps.add(app)
        if not expected.gateway_side:
            continue
        same_app = routes_by_app.get(app, [])
        assert same_app, f"no HTTPRoute with app {app} next to Ingress {name}"
        assert set().union(*(http_route_paths(route) for route in same_app)) == ingress_paths(ingress)
        for route in same_app:
            for parent in route["spec"]["parentRefs"]:
                assert parent["kind"] == "ListenerSet"
                assert (parent["namespace"], parent["name"]) in listener_sets
    for app, routes in routes_by_app.items():
        assert app in ingress_apps, [route["metadata"]["name"] for route in routes]
        assert {APPS[route["metadata"]["name"]] for route in routes} == {app}


@pytest.mark.parametrize("item", SCENARIOS, ids=ids)
def test_route_objects_are_valid_and_live_in_the_module_namespace(item: Scenario) -> None:
    for obj in route_objects(rendered(item.name)):
        validate_object(obj)
        assert obj["metadata"]["namespace"] == NAMESPACE
        assert obj["metadata"]["labels"]["module"] == "ai-models"


@pytest.mark.parametrize("item", SCENARIOS, ids=ids)
def test_the_listener_set_attaches_to_the_resolved_gateway_with_the_modes_tls(item: Scenario) -> None:
    chart, expected = rendered(item.name), Publishing.of(item)
    for listener_set in chart.of_kind("ListenerSet"):
        parent = listener_set["spec"]["parentRef"]
        assert {"name": parent["name"], "namespace": parent["namespace"]} == expected.gateway
        assert parent.get("kind", "Gateway") == "Gateway"
        assert parent.get("group", GATEWAY_GROUP) == GATEWAY_GROUP
        (listener,) = listener_set["spec"]["listeners"]
        assert listener["hostname"] == expected.host
        if expected.tls:
            assert (listener["protocol"], listener["port"]) == ("HTTPS", 443)
            assert listener["tls"]["mode"] == "Terminate"
            (ref,) = listener["tls"]["certificateRefs"]
            assert ref.get("kind", "Secret") == "Secret"
            assert ref.get("namespace", NAMESPACE) == NAMESPACE
            assert ref["name"] == expected.gateway_secret
            assert ref["name"] in tls_secrets(chart)
        else:
            assert (listener["protocol"], listener["port"]) == ("HTTP", 80)
            assert "tls" not in listener


@pytest.mark.parametrize("item", SCENARIOS, ids=ids)
def test_every_http_route_hangs_on_the_rendered_listener_set(item: Scenario) -> None:
    chart, expected = rendered(item.name), Publishing.of(item)
    listeners = {
        (obj["metadata"]["namespace"], obj["metadata"]["name"]): {
            listener["name"] for listener in obj["spec"]["listeners"]
        }
        for obj in chart.of_kind("ListenerSet")
    }
    for route in chart.of_kind("HTTPRoute"):
        name = route["metadata"]["name"]
        assert route["spec"]["parentRefs"], name
        for parent in route["spec"]["parentRefs"]:
            assert (parent["group"], parent["kind"]) == (GATEWAY_GROUP, "ListenerSet"), name
            key = (parent.get("namespace", route["metadata"]["namespace"]), parent["name"])
            assert key in listeners, f"{name} points at {key}, not a rendered ListenerSet"
            assert parent.get("sectionName") in listeners[key]
        assert route["spec"]["hostnames"] == [expected.host]
        assert http_route_paths(route) == HTTP_ROUTES[name]
        for rule in route["spec"]["rules"]:
            assert rule["backendRefs"] == [
                {"group": "", "kind": "Service", "name": API_SERVICE, "port": 80}
            ], name


@pytest.mark.parametrize("item", SCENARIOS, ids=ids)
def test_the_upload_route_has_no_timeouts_and_the_others_keep_the_defaults(item: Scenario) -> None:
    for route in rendered(item.name).of_kind("HTTPRoute"):
        timeouts = [rule.get("timeouts") for rule in route["spec"]["rules"]]
        if route["metadata"]["name"] == "ai-models-upload":
            # "0s" disables a Gateway API timeout; the upload streams as long as it takes.
            assert timeouts == [{"request": "0s", "backendRequest": "0s"}]
        else:
            assert timeouts == [None]


@pytest.mark.parametrize("item", SCENARIOS, ids=ids)
def test_ingresses_lead_to_the_api_with_the_modes_class_and_tls(item: Scenario) -> None:
    chart, expected = rendered(item.name), Publishing.of(item)
    service = chart.get("Service", API_SERVICE, NAMESPACE)
    assert {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"} in service["spec"]["ports"]
    for ingress in chart.of_kind("Ingress"):
        name, spec = ingress["metadata"]["name"], ingress["spec"]
        assert spec["ingressClassName"] == expected.ingress_class
        assert [rule["host"] for rule in spec["rules"]] == [expected.host]
        assert ingress_paths(ingress) == INGRESSES[name]
        for rule in spec["rules"]:
            for path in rule["http"]["paths"]:
                assert path["backend"] == {"service": {"name": API_SERVICE, "port": {"name": "http"}}}
                assert path["pathType"] == ("Exact" if path["path"] == CONTRACT else "Prefix")
        if expected.tls:
            (tls,) = spec["tls"]
            assert tls["hosts"] == [expected.host]
            assert tls["secretName"] == expected.ingress_secret
            assert tls["secretName"] in tls_secrets(chart)
        else:
            assert "tls" not in spec


@pytest.mark.parametrize("item", SCENARIOS, ids=ids)
def test_only_the_upload_ingress_lifts_the_body_limit_and_timeouts(item: Scenario) -> None:
    for ingress in rendered(item.name).of_kind("Ingress"):
        annotations = ingress["metadata"].get("annotations") or {}
        if ingress["metadata"]["name"] == "ai-models-upload":
            assert annotations[BODY_SIZE] == "0"
            assert annotations["nginx.ingress.kubernetes.io/proxy-request-buffering"] == "off"
            for timeout in ("proxy-read-timeout", "proxy-send-timeout"):
                assert int(annotations[f"nginx.ingress.kubernetes.io/{timeout}"]) >= LONG_TIMEOUT_SECONDS
        else:
            assert annotations.get(BODY_SIZE) != "0"
            assert not any(key.startswith("nginx.ingress.kubernetes.io/") for key in annotations)


@pytest.mark.parametrize("item", SCENARIOS, ids=ids)
def test_cert_manager_issues_one_certificate_per_secret_in_use_only_in_its_mode(item: Scenario) -> None:
    chart, expected = rendered(item.name), Publishing.of(item)
    certificates = chart.of_kind("Certificate")
    if expected.mode != "CertManager":
        assert certificates == []
        return
    for certificate in certificates:
        spec = certificate["spec"]
        assert spec["issuerRef"] == {"kind": "ClusterIssuer", "name": expected.issuer}
        assert spec["dnsNames"] == [expected.host]
    issued = [certificate["spec"]["secretName"] for certificate in certificates]
    assert len(issued) == len(set(issued))
    assert set(issued) == tls_secrets_in_use(chart) == expected.secrets_in_use


@pytest.mark.parametrize("item", SCENARIOS, ids=ids)
def test_the_controller_knows_the_public_upload_address(item: Scenario) -> None:
    expected = Publishing.of(item)
    assert upload_env(rendered(item.name)) == f"{expected.scheme}://{expected.host}"


def test_a_custom_certificate_is_copied_once_and_shared() -> None:
    for name in ("routes-custom-certificate", "https-custom-certificate"):
        chart = rendered(name)
        copies = [
            obj for obj in chart.of_kind("Secret") if obj["metadata"]["name"].endswith("-customcertificate")
        ]
        assert [obj["metadata"]["name"] for obj in copies] == [CUSTOM_TLS]
        assert copies[0]["data"]["tls.crt"] == scenario(name).internal["customCertificateData"]["tls.crt"]
        assert tls_secrets_in_use(chart) == {CUSTOM_TLS}
    assert Publishing.of(scenario("routes-custom-certificate")).gateway_side


def test_links_use_https_when_tls_ends_outside_the_cluster() -> None:
    chart = rendered("routes-gateway")
    (listener,) = chart.get("ListenerSet", "ai-models", NAMESPACE)["spec"]["listeners"]
    assert listener["protocol"] == "HTTP"
    assert upload_env(chart) == "https://ai-models.example.com"
    assert upload_env(rendered("https-disabled")) == "http://ai-models.example.com"


@pytest.mark.parametrize("page", ["ADMIN_GUIDE.md", "ADMIN_GUIDE.ru.md"])
def test_the_admin_guide_names_every_route_object_and_tls_secret(page: str) -> None:
    text = (DOCS_DIR / page).read_text(encoding="utf-8")
    names: set[str] = set()
    for item in SCENARIOS:
        chart = rendered(item.name)
        names |= {obj["metadata"]["name"] for obj in route_objects(chart)} | tls_secrets(chart)
    assert {INGRESS_TLS, HTTPROUTE_TLS, CUSTOM_TLS, *INGRESSES, *HTTP_ROUTES} <= names
    assert sorted(name for name in names if f"`{name}`" not in text) == []


# ----- when nothing is published ---------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["minimal", "gateway-api-present", "routes-gateway", "routes-custom-certificate", "https-disabled"],
)
def test_nothing_is_published_without_a_public_domain_template(name: str) -> None:
    item = without_public_domain(scenario(name))
    assert not Publishing.of(item).published
    chart = item.render()
    assert route_objects(chart) == []
    assert upload_env(chart) is None
    for obj in chart.objects:
        validate_object(obj)
