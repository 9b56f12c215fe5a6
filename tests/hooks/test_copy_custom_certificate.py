"""copy_custom_certificate: the custom HTTPS certificate from d8-system in internal values."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from deckhouse import hook

from support.render import render_chart
from support.values import MINIMAL_SETTINGS, deep_merge, module_values

SOURCES = "source_secrets"
NAMESPACE = "d8-ai-models"
COPY = "ai-models-ingress-tls-customcertificate"
CRT = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIBserver\n-----END CERTIFICATE-----\n").decode()
KEY = base64.b64encode(b"-----BEGIN PRIVATE KEY-----\nMIIBsecret\n-----END PRIVATE KEY-----\n").decode()
CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----\n").decode()


def source(name: str = "ai-models-tls", **data: str) -> dict[str, Any]:
    """filterResult of the d8-system binding: the name and the copied keys, base64 as in the object."""
    return {"name": name, "data": data}


def tls(name: str = "ai-models-tls", *, ca: bool = False) -> dict[str, Any]:
    data = {"tls.crt": CRT, "tls.key": KEY} | ({"ca.crt": CA} if ca else {})
    return source(name, **data)


def custom(secret: str = "ai-models-tls") -> dict[str, Any]:
    return {"mode": "CustomCertificate", "customCertificate": {"secretName": secret}}


def values(
    https: dict[str, Any] | None = None,
    *,
    global_https: dict[str, Any] | None = None,
    internal: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Module values with the module's `https` (or none) over the typical cluster's global CertManager."""
    settings = deep_merge(MINIMAL_SETTINGS, {"https": https} if https else {})
    overrides = {"modules": {"https": global_https}} if global_https else {}
    return module_values(settings, internal=internal, global_overrides=overrides)


def run(kit: Any, contexts: list[dict[str, Any]], initial: dict[str, Any]) -> Any:
    return hook.testrun(
        kit.load("copy_custom_certificate").main, binding_context=contexts, initial_values=initial
    )


def copied(kit: Any, initial: dict[str, Any], output: Any) -> Any:
    return kit.patched(initial, output)["aiModels"]["internal"].get("customCertificateData")


def test_synchronization_copies_only_the_named_secret(kit: Any) -> None:
    snaps = {SOURCES: kit.snapshot(tls("someone-else"), tls(), source("unrelated", token="eA=="))}
    initial = values(custom())
    output = run(kit, [kit.synchronization(SOURCES, snaps)], initial)
    assert copied(kit, initial, output) == {"tls.crt": CRT, "tls.key": KEY}
    assert kit.kube(output) == []


def test_the_ca_is_copied_when_the_secret_has_one(kit: Any) -> None:
    initial = values(custom())
    output = run(kit, [kit.before_helm({SOURCES: kit.snapshot(tls(ca=True))})], initial)
    assert copied(kit, initial, output) == {"tls.crt": CRT, "tls.key": KEY, "ca.crt": CA}


def test_a_rotated_secret_replaces_the_copy_on_its_event(kit: Any) -> None:
    rotated = base64.b64encode(b"rotated").decode()
    changed = source("ai-models-tls", **{"tls.crt": rotated, "tls.key": KEY})
    initial = values(custom(), internal={"customCertificateData": {"tls.crt": CRT, "tls.key": KEY}})
    output = run(kit, [kit.event(SOURCES, "Modified", changed, {SOURCES: kit.snapshot(changed)})], initial)
    assert copied(kit, initial, output) == {"tls.crt": rotated, "tls.key": KEY}


def test_a_copy_in_sync_writes_no_patch(kit: Any) -> None:
    initial = values(custom(), internal={"customCertificateData": {"tls.crt": CRT, "tls.key": KEY}})
    output = run(kit, [kit.event(SOURCES, "Modified", tls(), {SOURCES: kit.snapshot(tls())})], initial)
    assert output.values_patches.data == []


def test_the_global_mode_and_secret_apply_when_the_module_sets_no_mode(kit: Any) -> None:
    initial = values(global_https=custom("global-tls"))
    output = run(kit, [kit.before_helm({SOURCES: kit.snapshot(tls(), tls("global-tls", ca=True))})], initial)
    assert copied(kit, initial, output) == {"tls.crt": CRT, "tls.key": KEY, "ca.crt": CA}


@pytest.mark.parametrize(
    ("https", "global_https"),
    [
        (None, None),  # the typical cluster: global CertManager
        ({"mode": "OnlyInURI"}, custom()),  # the module's mode wins over the global CustomCertificate
        ({"mode": "Disabled"}, None),
    ],
    ids=["global-cert-manager", "module-only-in-uri", "module-disabled"],
)
def test_other_modes_remove_the_copy(
    kit: Any, https: dict[str, Any] | None, global_https: dict[str, Any] | None
) -> None:
    initial = values(
        https,
        global_https=global_https,
        internal={"customCertificateData": {"tls.crt": CRT, "tls.key": KEY}},
    )
    output = run(kit, [kit.before_helm({SOURCES: kit.snapshot(tls())})], initial)
    assert copied(kit, initial, output) is None


def test_a_deleted_secret_removes_the_copy_naming_the_secret_and_the_fix(kit: Any, capsys: Any) -> None:
    initial = values(custom(), internal={"customCertificateData": {"tls.crt": CRT, "tls.key": KEY}})
    output = run(kit, [kit.event(SOURCES, "Deleted", tls(), {SOURCES: []})], initial)
    assert copied(kit, initial, output) is None
    err = capsys.readouterr().err
    assert "Secret d8-system/ai-models-tls not found" in err
    assert "create it with tls.crt and tls.key, or set aiModels.https.customCertificate.secretName" in err
    assert KEY not in err


def test_a_missing_secret_named_globally_names_the_global_setting(kit: Any, capsys: Any) -> None:
    initial = values(global_https=custom("global-tls"))
    output = run(kit, [kit.synchronization(SOURCES, {SOURCES: kit.snapshot(tls())})], initial)
    assert copied(kit, initial, output) is None
    assert output.values_patches.data == []
    err = capsys.readouterr().err
    assert "Secret d8-system/global-tls not found" in err
    assert "global.modules.https.customCertificate.secretName" in err


def test_an_incomplete_secret_leaves_the_copy_and_logs_no_data(kit: Any, capsys: Any) -> None:
    partial = source("ai-models-tls", **{"tls.crt": CRT})
    initial = values(custom(), internal={"customCertificateData": {"tls.crt": CRT, "tls.key": KEY}})
    output = run(kit, [kit.event(SOURCES, "Modified", partial, {SOURCES: kit.snapshot(partial)})], initial)
    assert output.values_patches.data == []
    captured = capsys.readouterr()
    assert "Secret d8-system/ai-models-tls lacks tls.key" in captured.err
    assert CRT not in captured.out + captured.err


def test_several_contexts_in_one_run_leave_the_current_certificate(kit: Any) -> None:
    """Each context starts from the same values; every one computes from the full snapshot."""
    rotated = source("ai-models-tls", **{"tls.crt": CRT, "tls.key": KEY, "ca.crt": CA})
    old = {SOURCES: kit.snapshot(tls())}
    new = {SOURCES: kit.snapshot(rotated)}
    initial = values(custom())
    contexts = [
        kit.synchronization(SOURCES, old),
        kit.event(SOURCES, "Modified", rotated, new),
        kit.before_helm(new),
    ]
    output = run(kit, contexts, initial)
    expected = {"tls.crt": CRT, "tls.key": KEY, "ca.crt": CA}
    assert copied(kit, initial, output) == expected
    assert output.values["aiModels"]["internal"]["customCertificateData"] == expected


def test_the_chart_renders_the_copy_the_routes_use(kit: Any) -> None:
    initial = values(custom())
    output = run(kit, [kit.before_helm({SOURCES: kit.snapshot(tls(ca=True))})], initial)
    chart = render_chart(kit.patched(initial, output))
    secret = chart.get("Secret", COPY, NAMESPACE)
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["data"] == {"tls.crt": CRT, "tls.key": KEY, "ca.crt": CA}
    assert {ingress["spec"]["tls"][0]["secretName"] for ingress in chart.of_kind("Ingress")} == {COPY}
