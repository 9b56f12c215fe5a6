"""Value scenarios of the render test bed: one YAML file per cluster situation.

A scenario file in `tests/fixtures/values/` has these keys (all optional except `description`):

    description: what cluster situation it models
    settings:    ModuleConfig spec.settings, merged over the minimal valid settings
                 (`null` deletes a key)
    internal:    hook-computed values under aiModels.internal
    global:      overrides of the typical cluster's global values (`null` deletes a key)
    registry:    overrides of aiModels.registry (what Deckhouse injects for an external module)
    apiVersions: what `.Capabilities.APIVersions` serves, "group/version" and "group/version/Kind"
    kubeVersion: what `.Capabilities.KubeVersion` reports (default v1.34.0)

A certificate under `internal` may be written as `generated` instead of spelled out: it becomes
`{ca, crt, key}` (PEM) of a fresh CA and a certificate it signed for the api Service's names, made
once per test run (`generated_certificate`), so no private key lives in the repository.

Values are built by `support.values.module_values`, so a scenario with a broken setting fails
with the setting's path before Helm runs.
"""

from __future__ import annotations

import base64
import copy
import datetime
import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from support.paths import REPO_ROOT, VALUES_FIXTURES_DIR
from support.render import KUBE_VERSION, RenderedChart, render_chart
from support.values import (
    MINIMAL_SETTINGS,
    MODULE_VALUES_KEY,
    deep_merge,
    module_values,
    validate,
    values_schema,
)

REGISTRY_HOST = "registry.example.com"
# What Deckhouse puts under aiModels.registry for a module installed from a ModuleSource.
DEFAULT_REGISTRY: dict[str, Any] = {
    "base": f"{REGISTRY_HOST}/deckhouse/modules",
    "dockercfg": base64.b64encode(
        json.dumps({"auths": {REGISTRY_HOST: {"auth": base64.b64encode(b"reader:secret").decode()}}}).encode()
    ).decode(),
    "scheme": "https",
}

_KEYS = {"description", "settings", "internal", "global", "registry", "apiVersions", "kubeVersion"}
GENERATED_CERTIFICATE = "generated"
# The names in-cluster clients reach the api Service by; the cluster domain is left to the resolver.
API_SERVICE_NAMES = ("ai-models-api", "ai-models-api.d8-ai-models", "ai-models-api.d8-ai-models.svc")


class InvalidScenario(ValueError):
    """A scenario file that does not follow the format above."""


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    settings: dict[str, Any] = field(default_factory=dict)
    internal: dict[str, Any] = field(default_factory=dict)
    global_overrides: dict[str, Any] = field(default_factory=dict)
    registry: dict[str, Any] = field(default_factory=dict)
    api_versions: tuple[str, ...] = ()
    kube_version: str = KUBE_VERSION

    def values(self) -> dict[str, Any]:
        """Full Helm values, defaulted and validated like addon-operator does."""
        values = module_values(
            deep_merge(MINIMAL_SETTINGS, self.settings),
            internal=self.internal or None,
            global_overrides=self.global_overrides,
        )
        module = values[MODULE_VALUES_KEY]
        module["registry"] = deep_merge(DEFAULT_REGISTRY, self.registry)
        validate(values_schema(), module)
        return values

    def render(self, chart_dir: Path = REPO_ROOT) -> RenderedChart:
        return render_chart(
            self.values(),
            api_versions=self.api_versions,
            kube_version=self.kube_version,
            chart_dir=chart_dir,
        )


def _mapping(raw: Mapping[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = raw.get(key) or {}
    if not isinstance(value, Mapping):
        raise InvalidScenario(f"{path.name}: {key} must be a mapping")
    return copy.deepcopy(dict(value))


@dataclass(frozen=True)
class CertificatePair:
    ca_pem: str
    cert_pem: str
    key_pem: str


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


@cache
def generated_certificate(hosts: tuple[str, ...] = API_SERVICE_NAMES, *, days: int = 30) -> CertificatePair:
    """A CA and a server certificate it signed for `hosts` (DNS names or IP addresses), EC P-256."""
    now = datetime.datetime.now(datetime.UTC)
    not_before, not_after = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder(
            subject_name=_name("ai-models test CA"),
            issuer_name=_name("ai-models test CA"),
            not_valid_before=not_before,
            not_valid_after=not_after,
        )
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder(
            subject_name=_name(hosts[0]),
            issuer_name=ca.subject,
            not_valid_before=not_before,
            not_valid_after=not_after,
        )
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return CertificatePair(
        ca_pem=ca.public_bytes(serialization.Encoding.PEM).decode(),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM).decode(),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode(),
    )


def _with_generated_certificates(internal: dict[str, Any]) -> dict[str, Any]:
    for key, value in internal.items():
        if value == GENERATED_CERTIFICATE:
            pair = generated_certificate()
            # The module CA itself is the pair's CA (its key is not kept: no template signs anything).
            internal[key] = (
                {"crt": pair.ca_pem, "key": pair.key_pem}
                if key == "rootCA"
                else {"ca": pair.ca_pem, "crt": pair.cert_pem, "key": pair.key_pem}
            )
    return internal


def load_scenario(path: Path) -> Scenario:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(raw, Mapping):
        raise InvalidScenario(f"{path.name}: a scenario is a mapping")
    unknown = set(raw) - _KEYS
    if unknown:
        raise InvalidScenario(f"{path.name}: unknown keys {sorted(unknown)} (allowed: {sorted(_KEYS)})")
    if not raw.get("description"):
        raise InvalidScenario(f"{path.name}: description is required")
    api_versions = raw.get("apiVersions") or []
    if not isinstance(api_versions, list) or not all(isinstance(item, str) for item in api_versions):
        raise InvalidScenario(f"{path.name}: apiVersions must be a list of strings")
    return Scenario(
        name=path.stem,
        description=str(raw["description"]).strip(),
        settings=_mapping(raw, "settings", path),
        internal=_with_generated_certificates(_mapping(raw, "internal", path)),
        global_overrides=_mapping(raw, "global", path),
        registry=_mapping(raw, "registry", path),
        api_versions=tuple(api_versions),
        kube_version=str(raw.get("kubeVersion") or KUBE_VERSION),
    )


@cache
def load_scenarios(directory: Path = VALUES_FIXTURES_DIR) -> tuple[Scenario, ...]:
    """Every scenario in the directory, sorted by name."""
    return tuple(load_scenario(path) for path in sorted(directory.glob("*.yaml")))


def scenario(name: str) -> Scenario:
    for candidate in load_scenarios():
        if candidate.name == name:
            return candidate
    raise KeyError(f"no scenario {name!r} in {VALUES_FIXTURES_DIR}")
