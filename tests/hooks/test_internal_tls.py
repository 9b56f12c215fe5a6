"""internal_tls: the module CA and the api certificate, kept across restarts through Secret snapshots."""

from __future__ import annotations

import base64
import datetime as dt
import re
from typing import Any

import pytest
from cryptography import x509
from deckhouse import hook

from lib.tls import require_cryptography
from support.paths import REPO_ROOT
from support.render import render_chart
from support.values import module_values

ROOT_CA, API_TLS, CONTROLLER_TLS = "root_ca", "api_tls", "controller_tls"
NAMES = [
    "ai-models-api.d8-ai-models.svc",
    "ai-models-api.d8-ai-models.svc.cluster.local",
    "ai-models-api.d8-ai-models",
    "ai-models-api",
]


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def secret(pair: Any) -> dict[str, str]:
    """filterResult of the Secret bindings: base64 data as in the object."""
    return {
        "crt": base64.b64encode(pair.crt.encode()).decode(),
        "key": base64.b64encode(pair.key.encode()).decode(),
    }


def run(kit: Any, contexts: list[dict[str, Any]], values: dict[str, Any]) -> Any:
    return hook.testrun(kit.load("internal_tls").main, binding_context=contexts, initial_values=values)


def issued(
    kit: Any, *, ca_days: int = 3650, cert_days: int = 365, names: list[str] = NAMES
) -> tuple[Any, Any]:
    lib = kit.load("internal_tls")  # its generate_ca/issue_certificate are lib.tls's
    ca = lib.generate_ca("ai-models-ca", now(), dt.timedelta(days=ca_days))
    cert = lib.issue_certificate(
        ca, "ai-models-api.d8-ai-models.svc", names, now(), dt.timedelta(days=cert_days)
    )
    return ca, cert


def check_pair(internal: dict[str, Any], names: list[str] = NAMES) -> x509.Certificate:
    ca = x509.load_pem_x509_certificate(internal["rootCA"]["crt"].encode())
    cert = x509.load_pem_x509_certificate(internal["apiCert"]["crt"].encode())
    assert internal["apiCert"]["ca"] == internal["rootCA"]["crt"]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    cert.verify_directly_issued_by(ca)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sorted(sans.get_values_for_type(x509.DNSName)) == sorted(names)
    assert cert.not_valid_after_utc - now() > dt.timedelta(days=300)
    assert "PRIVATE KEY" in internal["rootCA"]["key"]
    assert "PRIVATE KEY" in internal["apiCert"]["key"]
    return cert


def empty() -> dict[str, Any]:
    return {ROOT_CA: [], API_TLS: [], CONTROLLER_TLS: []}


def test_fresh_install_generates_ca_and_certificate(kit: Any) -> None:
    values = module_values()
    output = run(kit, [kit.before_helm(empty())], values)
    internal = kit.patched(values, output)["aiModels"]["internal"]
    check_pair(internal)
    assert {patch["path"] for patch in output.values_patches.data} == {
        "/aiModels/internal/rootCA/crt",
        "/aiModels/internal/rootCA/key",
        "/aiModels/internal/apiCert/ca",
        "/aiModels/internal/apiCert/crt",
        "/aiModels/internal/apiCert/key",
        "/aiModels/internal/controllerCert/ca",
        "/aiModels/internal/controllerCert/crt",
        "/aiModels/internal/controllerCert/key",
    }


def test_restart_reads_both_back_from_the_secrets(kit: Any) -> None:
    ca, cert = issued(kit)
    values = module_values()  # internal values are lost on a Deckhouse restart
    output = run(
        kit,
        [kit.before_helm({ROOT_CA: kit.snapshot(secret(ca)), API_TLS: kit.snapshot(secret(cert))})],
        values,
    )
    internal = kit.patched(values, output)["aiModels"]["internal"]
    assert internal["rootCA"] == {"crt": ca.crt, "key": ca.key}
    assert internal["apiCert"] == {"ca": ca.crt, "crt": cert.crt, "key": cert.key}


def test_valid_values_write_no_patch(kit: Any) -> None:
    ca, cert = issued(kit)
    lib = kit.load("internal_tls")
    controller_names = lib.service_dns_names("ai-models-controller", "cluster.local")
    controller = lib.issue_certificate(ca, controller_names[0], controller_names, now())
    values = module_values(
        internal={
            "rootCA": {"crt": ca.crt, "key": ca.key},
            "apiCert": {"ca": ca.crt, "crt": cert.crt, "key": cert.key},
            "controllerCert": {"ca": ca.crt, "crt": controller.crt, "key": controller.key},
        }
    )
    output = run(kit, [kit.schedule("renew", empty())], values)
    assert output.values_patches.data == []


def test_ca_expiring_within_30_days_is_renewed_with_the_certificate(kit: Any) -> None:
    ca, cert = issued(kit, ca_days=20, cert_days=20)
    values = module_values()
    output = run(
        kit,
        [kit.schedule("renew", {ROOT_CA: kit.snapshot(secret(ca)), API_TLS: kit.snapshot(secret(cert))})],
        values,
    )
    internal = kit.patched(values, output)["aiModels"]["internal"]
    assert internal["rootCA"]["crt"] != ca.crt
    assert internal["apiCert"]["crt"] != cert.crt
    check_pair(internal)


def test_certificate_expiring_soon_is_reissued_by_the_same_ca(kit: Any) -> None:
    ca, cert = issued(kit, cert_days=10)
    values = module_values()
    output = run(
        kit,
        [kit.before_helm({ROOT_CA: kit.snapshot(secret(ca)), API_TLS: kit.snapshot(secret(cert))})],
        values,
    )
    internal = kit.patched(values, output)["aiModels"]["internal"]
    assert internal["rootCA"] == {"crt": ca.crt, "key": ca.key}
    assert internal["apiCert"]["crt"] != cert.crt
    check_pair(internal)


def test_changed_cluster_domain_reissues_the_certificate(kit: Any) -> None:
    ca, cert = issued(kit)
    values = module_values(
        internal={
            "rootCA": {"crt": ca.crt, "key": ca.key},
            "apiCert": {"ca": ca.crt, "crt": cert.crt, "key": cert.key},
        },
        global_overrides={"discovery": {"clusterDomain": "corp.internal"}},
    )
    output = run(kit, [kit.before_helm(empty())], values)
    internal = kit.patched(values, output)["aiModels"]["internal"]
    assert internal["rootCA"]["crt"] == ca.crt
    names = [name.replace("cluster.local", "corp.internal") for name in NAMES]
    check_pair(internal, names)


def test_certificate_of_another_ca_is_reissued(kit: Any) -> None:
    ca, _ = issued(kit)
    _, foreign = issued(kit)
    values = module_values()
    output = run(
        kit,
        [kit.before_helm({ROOT_CA: kit.snapshot(secret(ca)), API_TLS: kit.snapshot(secret(foreign))})],
        values,
    )
    internal = kit.patched(values, output)["aiModels"]["internal"]
    assert internal["rootCA"]["crt"] == ca.crt
    assert internal["apiCert"]["crt"] != foreign.crt
    check_pair(internal)


def test_broken_secret_data_is_replaced(kit: Any) -> None:
    ca, _ = issued(kit)
    broken = {"crt": "not base64!", "key": secret(ca)["key"]}
    mismatched = {"crt": secret(ca)["crt"], "key": secret(issued(kit)[0])["key"]}
    values = module_values()
    output = run(kit, [kit.before_helm({ROOT_CA: kit.snapshot(broken, mismatched), API_TLS: []})], values)
    internal = kit.patched(values, output)["aiModels"]["internal"]
    assert internal["rootCA"]["crt"] != ca.crt
    check_pair(internal)


def test_several_contexts_in_one_run_leave_a_consistent_pair(kit: Any) -> None:
    values = module_values()
    output = run(kit, [kit.schedule("renew", empty()), kit.before_helm(empty())], values)
    # Each context starts from the same values and issues its own pair; the last patches win.
    check_pair(kit.patched(values, output)["aiModels"]["internal"])
    check_pair(output.values["aiModels"]["internal"])


def test_what_the_chart_renders_from_the_values_is_what_the_hook_reads_back(kit: Any) -> None:
    values = module_values()
    internal = kit.patched(values, run(kit, [kit.before_helm(empty())], values))["aiModels"]["internal"]
    chart = render_chart(module_values(internal=internal))

    def read_back(name: str) -> dict[str, str]:
        data = chart.get("Secret", name, "d8-ai-models")["data"]
        # The binding's jqFilter: {crt: .data["tls.crt"], key: .data["tls.key"]}
        return {"crt": data["tls.crt"], "key": data["tls.key"]}

    restarted = module_values()  # internal values are lost on a Deckhouse restart
    output = run(
        kit,
        [
            kit.before_helm(
                {
                    ROOT_CA: kit.snapshot(read_back("ai-models-root-ca")),
                    API_TLS: kit.snapshot(read_back("ai-models-api-tls")),
                    CONTROLLER_TLS: kit.snapshot(read_back("ai-models-controller-tls")),
                }
            )
        ],
        restarted,
    )
    assert kit.patched(restarted, output)["aiModels"]["internal"] == internal


def test_the_controller_webhook_certificate_names_the_controller_service_and_is_signed_by_the_ca(
    kit: Any,
) -> None:
    values = module_values()
    internal = kit.patched(values, run(kit, [kit.before_helm(empty())], values))["aiModels"]["internal"]
    ca = x509.load_pem_x509_certificate(internal["rootCA"]["crt"].encode())
    cert = x509.load_pem_x509_certificate(internal["controllerCert"]["crt"].encode())
    cert.verify_directly_issued_by(ca)
    assert internal["controllerCert"]["ca"] == internal["rootCA"]["crt"]
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sorted(sans.get_values_for_type(x509.DNSName)) == sorted(
        [
            "ai-models-controller.d8-ai-models.svc",
            "ai-models-controller.d8-ai-models.svc.cluster.local",
            "ai-models-controller.d8-ai-models",
            "ai-models-controller",
        ]
    )
    # The api's certificate is a different one: each names only its own Service.
    assert internal["controllerCert"]["crt"] != internal["apiCert"]["crt"]


def test_a_cryptography_older_than_the_apis_used_fails_with_the_reason() -> None:
    """41.0.7 lacks Certificate.not_valid_after_utc (checked with that wheel, D126)."""
    message = (
        "hooks/lib/tls.py needs cryptography >= 42.0, this interpreter imports 41.0.7: the Deckhouse "
        "image's own packages come before lib/python/dist on sys.path (D126); run the module on a "
        "Deckhouse release whose image ships cryptography >= 42.0"
    )
    with pytest.raises(RuntimeError, match=re.escape(message)):
        require_cryptography("41.0.7")
    require_cryptography("42.0.0")
    require_cryptography("50.0.2")


def test_the_cryptography_of_the_deckhouse_image_is_new_enough() -> None:
    """tests/platform-requirements.txt is what the image ships (D126); its pin must pass the check."""
    pins = dict(
        line.split("==")
        for line in (REPO_ROOT / "tests" / "platform-requirements.txt")
        .read_text(encoding="utf-8")
        .splitlines()
        if line and not line.startswith("#")
    )
    require_cryptography(pins["cryptography"])
