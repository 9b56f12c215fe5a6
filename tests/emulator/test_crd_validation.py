"""kubeemu.crdvalidation without a server: structural checks, pruning, defaulting, OpenAPI and CEL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeemu.crds import load_crd_manifests
from kubeemu.crdvalidation import (
    CRDSchema,
    FieldError,
    NonStructuralSchemaError,
    RuleCompileError,
    invalid_message,
)

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def widgets() -> CRDSchema:
    return CRDSchema.from_crd(yaml.safe_load((FIXTURES / "widgets.example.test.yaml").read_text()))


def widget(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"source": {"url": "https://example.test/m"}}
    body.update(spec)
    return {"apiVersion": "example.test/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": body}


def schema(openapi: dict[str, Any], *, check: bool = True) -> CRDSchema:
    return CRDSchema.from_openapi({"type": "object", "properties": {"spec": openapi}}, check=check)


def messages(errors: list[FieldError]) -> list[str]:
    return [str(e) for e in errors]


def test_valid_object_has_no_errors_and_gets_defaults(widgets: CRDSchema) -> None:
    admitted = widgets.admit(widget())
    assert admitted.errors == []
    assert admitted.object["spec"]["size"] == 1
    assert admitted.object["spec"]["mode"] == "Fast"


def test_unknown_fields_are_pruned_and_reported(widgets: CRDSchema) -> None:
    admitted = widgets.admit(
        {**widget(junk=1, extra={"free": {"form": 1}}), "metadata": {"name": "w", "bad": 1}}
    )
    assert admitted.pruned == ["metadata.bad", "spec.junk"]
    assert "junk" not in admitted.object["spec"]
    assert admitted.object["spec"]["extra"] == {"free": {"form": 1}}  # preserve-unknown-fields keeps it


def test_cel_rule_message_names_the_field(widgets: CRDSchema) -> None:
    errors = widgets.validate(widget(source={"url": "https://example.test/m", "upload": {}}))
    assert messages(errors) == [
        'spec.source: Invalid value: "object": exactly one of url, upload or catalog must be set'
    ]
    assert errors[0].reason == "FieldValueInvalid"
    assert errors[0].rule is not None
    assert errors[0].rule.location == "spec.source"
    assert invalid_message(kind="Widget", group="example.test", name="w1", errors=errors) == (
        'Widget.example.test "w1" is invalid: spec.source: Invalid value: "object": '
        "exactly one of url, upload or "
        "catalog must be set"
    )


def test_field_path_message_expression_and_reason(widgets: CRDSchema) -> None:
    errors = widgets.validate(widget(source={"url": "http://example.test/m"}, **{"my-setting": "forbidden"}))
    assert messages(errors) == [
        'spec.source.url: Invalid value: "object": url must be an https URL',
        "spec.my-setting: Forbidden: value forbidden is not allowed",
    ]


def test_root_rule_sees_metadata_name(widgets: CRDSchema) -> None:
    obj = widget()
    obj["metadata"]["name"] = "a-name-much-longer-than-twenty"
    assert messages(widgets.validate(obj)) == [
        '<nil>: Invalid value: "object": name must be at most 20 characters'
    ]


def test_rules_on_list_items_report_the_index(widgets: CRDSchema) -> None:
    assert messages(widgets.validate(widget(tags=["ok", "NotOk"]))) == [
        'spec.tags[1]: Invalid value: "string": tags must be lowercase'
    ]


def test_transition_rules_run_only_on_update(widgets: CRDSchema) -> None:
    old = widgets.default_and_prune(widget(ports=[{"name": "http", "number": 80}]))
    new = widgets.default_and_prune(
        widget(
            source={"url": "https://example.test/other"},
            ports=[{"name": "http", "number": 81}, {"name": "new", "number": 1}],
        )
    )
    assert widgets.validate(new) == []
    assert messages(widgets.validate(new, old)) == [
        'spec.source: Invalid value: "object": spec.source is immutable',
        'spec.ports[0]: Invalid value: "object": port numbers are immutable',
    ]


def test_unchanged_values_are_ratcheted_on_update(widgets: CRDSchema) -> None:
    old = widget(code="Bad_Old")
    new = widget(code="Bad_Old", size=5)
    assert messages(widgets.validate(new)) == [
        "spec.code: Invalid value: \"Bad_Old\": spec.code in body should match '^[a-z][a-z0-9-]*$'"
    ]
    assert widgets.validate(new, old) == []


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"size": 0}, "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"),
        ({"size": 11}, "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10"),
        ({"code": "abcdefghijklmnop"}, "spec.code: Too long: may not be more than 12 bytes"),
        ({"tags": ["a", "b", "c", "d"]}, "spec.tags: Too many: 4: must have at most 3 items"),
        ({"tags": ["a", "a"]}, 'spec.tags[1]: Duplicate value: "a"'),
        (
            {"ports": [{"name": "x"}, {"name": "x"}]},
            'spec.ports[1]: Duplicate value: map[string]interface {}{"name":"x"}',
        ),
        ({"labels": {"k": "toolong"}}, "spec.labels.k: Too long: may not be more than 5 bytes"),
        ({"ports": [{"number": 1}]}, "spec.ports[0].name: Required value"),
    ],
)
def test_openapi_constraints_use_kube_openapi_messages(
    widgets: CRDSchema, spec: dict[str, Any], expected: str
) -> None:
    assert expected in messages(widgets.validate(widget(**spec)))


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"mode": "Turbo"}, 'spec.mode: Unsupported value: "Turbo": supported values: "Fast", "Slow"'),
        (
            {"size": "big"},
            'spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"',
        ),
        (
            {"startAt": "yesterday"},
            'spec.startAt: Invalid value: "yesterday": '
            'spec.startAt in body must be of type date-time: "yesterday"',
        ),
        (
            {"port": 1.5},
            'spec.port: Invalid value: "number": spec.port in body must be of type integer,string: "number"',
        ),
    ],
)
def test_type_and_enum_errors_block_cel_like_the_apiserver(
    widgets: CRDSchema, spec: dict[str, Any], expected: str
) -> None:
    found = messages(widgets.validate(widget(source={"url": "https://e/x", "upload": {}}, **spec)))
    assert found[0] == expected
    assert found[-1].startswith('<nil>: Invalid value: "null": some validation rules were not checked')
    assert not any("exactly one of" in m for m in found)


def test_int_or_string_number_and_valid_formats(widgets: CRDSchema) -> None:
    assert widgets.validate(widget(port="http", ratio=1, startAt="2025-01-02T03:04:05Z")) == []
    assert widgets.validate(widget(port=8080)) == []


def test_null_in_non_nullable_field_is_defaulted_or_dropped() -> None:
    s = schema(
        {
            "type": "object",
            "properties": {
                "a": {"type": "string", "default": "x"},
                "b": {"type": "string"},
                "c": {"type": "string", "nullable": True},
            },
        }
    )
    assert s.default_and_prune({"spec": {"a": None, "b": None, "c": None}}) == {"spec": {"a": "x", "c": None}}


def test_nested_defaults_apply_inside_defaulted_objects() -> None:
    s = schema(
        {
            "type": "object",
            "properties": {
                "outer": {
                    "type": "object",
                    "default": {},
                    "properties": {"inner": {"type": "integer", "default": 3}},
                }
            },
        }
    )
    assert s.default_and_prune({"spec": {}}) == {"spec": {"outer": {"inner": 3}}}


@pytest.mark.parametrize(
    ("openapi", "fragment"),
    [
        (
            {"type": "object", "properties": {"x": {"description": "no type"}}},
            "properties[spec].properties[x].type: Required value: "
            "must not be empty for specified object fields",
        ),
        ({"type": "array"}, "properties[spec].items: Required value"),
        (
            {
                "type": "object",
                "properties": {"x": {"type": "string"}},
                "additionalProperties": {"type": "string"},
            },
            "additionalProperties and properties are mutual exclusive",
        ),
        ({"type": "object", "anyOf": [{"type": "object"}]}, "anyOf[0].type: Forbidden"),
        (
            {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "uniqueItems cannot be set to true",
        ),
        ({"type": "string", "x-kubernetes-preserve-unknown-fields": False}, "must be true or undefined"),
        (
            {"type": "object", "properties": {"x": {"type": "integer", "default": "text"}}},
            "default: Invalid value",
        ),
        (
            {"type": "object", "properties": {"x": {"type": "object", "default": {"y": 1}}}},
            "must not have unknown fields",
        ),
        (
            {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "items": {"type": "object", "properties": {"k": {"type": "string"}}},
            },
            "x-kubernetes-list-map-keys: Required value",
        ),
    ],
)
def test_non_structural_schemas_are_rejected(openapi: dict[str, Any], fragment: str) -> None:
    with pytest.raises(NonStructuralSchemaError) as caught:
        schema(openapi)
    assert any(fragment in e for e in caught.value.errors), caught.value.errors
    assert any(fragment in e for e in schema(openapi, check=False).structural_errors())


@pytest.mark.parametrize(
    ("rule", "fragment"),
    [
        ("self.sorce == 1", "undefined field 'sorce'"),
        ("has(self.nope)", "undefined field 'nope'"),
        ("self.name.size() > 0 && noSuchFunction(self.name)", "undeclared reference to 'noSuchFunction'"),
        ("self.?name.orValue('') == ''", "compilation failed"),
        ("self.name ==", "compilation failed"),
        ("self.items.all(i, i.nam != '')", "undefined field 'nam'"),
    ],
)
def test_rules_that_do_not_compile_fail_at_load(rule: str, fragment: str) -> None:
    openapi = {
        "type": "object",
        "x-kubernetes-validations": [{"rule": rule}],
        "properties": {
            "name": {"type": "string"},
            "source": {"type": "string"},
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"name": {"type": "string"}}},
            },
        },
    }
    with pytest.raises(RuleCompileError) as caught:
        schema(openapi)
    assert fragment in caught.value.errors[0]


def test_old_self_is_refused_where_it_cannot_correlate() -> None:
    openapi = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]},
            }
        },
    }
    with pytest.raises(RuleCompileError) as caught:
        schema(openapi)
    assert "oldSelf cannot be used on the uncorrelatable portion of the schema" in caught.value.errors[0]


def test_rules_list_every_validation_with_its_location(widgets: CRDSchema) -> None:
    found = {(r.location, r.message or r.message_expression) for r in widgets.rules()}
    assert ("spec.source", "spec.source is immutable") in found
    assert ("spec.tags[*]", "tags must be lowercase") in found
    assert ("", "name must be at most 20 characters") in found
    assert all(r.schema_path.startswith("spec.versions[0].schema.openAPIV3Schema") for r in widgets.rules())


def test_escaped_property_names_and_absent_fields() -> None:
    s = schema(
        {
            "type": "object",
            "properties": {
                "my-field": {"type": "string"},
                "namespace": {"type": "string"},
                "opt": {"type": "string"},
            },
            "x-kubernetes-validations": [
                {"rule": "self.my__dash__field == self.__namespace__", "message": "must match"},
                {"rule": "!has(self.opt) || self.opt != ''", "message": "opt must not be empty"},
            ],
        }
    )
    assert s.validate({"spec": {"my-field": "a", "namespace": "a"}}) == []
    assert messages(s.validate({"spec": {"my-field": "a", "namespace": "b", "opt": ""}})) == [
        'spec: Invalid value: "object": must match',
        'spec: Invalid value: "object": opt must not be empty',
    ]


def test_rule_reading_an_absent_field_reports_no_such_key() -> None:
    s = schema(
        {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": "self.a == 'x'"}],
        }
    )
    assert messages(s.validate({"spec": {}})) == [
        "spec: Invalid value: \"object\": no such key: a evaluating rule: self.a == 'x'"
    ]


@pytest.mark.parametrize(
    "rule",
    [
        "isURL(self.s) && url(self.s).getHost() == 'example.com:8443' "
        "&& url(self.s).getHostname() == 'example.com'",
        "url(self.s).getScheme() == 'https' && url(self.s).getPath() == '/a/b'".replace(
            "getPath", "getEscapedPath"
        ),
        "url(self.s).getQuery()['q'] == ['1']",
        "self.s.lowerAscii().startsWith('https') && self.s.split('/').size() == 5",
        "['a', 'b'].join('-') == 'a-b' && 'abc'.indexOf('c') == 2 && [1, 2, 3].indexOf(2) == 1",
        "quantity('1Gi').isGreaterThan(quantity('1000Mi')) && isQuantity('500m')",
        "sets.contains([1, 2, 3], [2]) && sets.intersects([1], [1, 5]) && !sets.equivalent([1], [2])",
        "[3, 1].max() == 3 && [1, 2].isSorted() && [1.5, 2.0].sum() == 3.5",
        "1 < 2.5 && duration('1h') > duration('30m') "
        "&& timestamp('2025-01-01T00:00:00Z').getFullYear() == 2025",
        "isIP('10.0.0.1') && cidr('10.0.0.0/8').containsIP(ip('10.1.2.3'))",
        "'a1b2'.findAll('[0-9]') == ['1', '2'] && 'x-y'.replace('-', '_') == 'x_y'",
    ],
)
def test_kubernetes_cel_libraries(rule: str) -> None:
    s = schema(
        {
            "type": "object",
            "properties": {"s": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": rule, "message": "library mismatch"}],
        }
    )
    assert s.validate({"spec": {"s": "https://example.com:8443/a/b?q=1"}}) == []


def test_real_module_crds_are_structural_and_compile() -> None:
    crds = load_crd_manifests(Path(__file__).resolve().parents[2] / "crds")
    assert {c["spec"]["names"]["kind"] for c in crds} >= {"Model", "ClusterModel", "ModelCatalogSource"}
    for crd in crds:
        for version in crd["spec"]["versions"]:
            assert CRDSchema.from_crd(crd, version=version["name"]).rules()
