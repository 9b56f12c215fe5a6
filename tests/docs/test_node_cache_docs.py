"""The admin guide's "Delivery: NodeCache" section says what the chart and the node plugin do: the
exception's allowances and host paths as rendered, the names an admin reads on a Node, the
delivery reasons, and a cache report in the format the plugin writes."""

from __future__ import annotations

import datetime
import json
import re
from functools import cache

import pytest

from ai_models.domain.delivery.node_cache import CacheReport
from ai_models.names import (
    NODE_CACHE_DRIVER,
    NODE_CACHE_READY_LABEL,
    NODE_CACHE_REPORT_ANNOTATION,
    DeliveryReason,
)
from support.paths import DOCS_DIR
from support.render import RenderedChart
from support.scenarios import scenario

SECTIONS = {"ADMIN_GUIDE.md": "## Delivery: NodeCache", "ADMIN_GUIDE.ru.md": "## Доставка: NodeCache"}
EXCEPTION = "ai-models-node-cache"
ACCOUNT_PHRASE = {
    "ADMIN_GUIDE.md": "The plugin's ServiceAccount `{account}`",
    "ADMIN_GUIDE.ru.md": "ServiceAccount плагина `{account}`",
}


@cache
def section(page: str) -> str:
    text = (DOCS_DIR / page).read_text(encoding="utf-8")
    start = text.index(SECTIONS[page] + "\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


@cache
def chart() -> RenderedChart:
    return scenario("delivery-node-cache").render()


@pytest.mark.parametrize("page", SECTIONS)
def test_the_section_names_every_allowance_of_the_rendered_exception(page: str) -> None:
    spec = chart().get("SecurityPolicyException", EXCEPTION)["spec"]
    text = section(page)
    for path in (item["path"] for item in spec["volumes"]["hostPath"]["allowedValues"]):
        assert f"| hostPath `{path}` |" in text, path
    for field, allowance in spec["securityContext"].items():
        for value in allowance.get("allowedValues", [allowance.get("allowedValue")]):
            assert f"`{field}: {json.dumps(value)}`" in text, (field, value)
    # Each allowance is one table row with its reason; nothing else is a row of that table.
    rows = [line for line in text.splitlines() if line.startswith("| `") or line.startswith("| hostPath")]
    assert len(rows) == len(spec["volumes"]["hostPath"]["allowedValues"]) + 3


@pytest.mark.parametrize("page", SECTIONS)
def test_the_section_uses_the_names_an_admin_reads(page: str) -> None:
    text = section(page)
    for name in (
        NODE_CACHE_DRIVER,
        NODE_CACHE_READY_LABEL,
        NODE_CACHE_REPORT_ANNOTATION,
        EXCEPTION,
        DeliveryReason.INSUFFICIENT_NODE_CACHE_CAPACITY,
        DeliveryReason.NODE_CACHE_DELIVERY_DISABLED,
        "security.deckhouse.io/security-policy-exception",
        "delivery.nodeCache.size",
        "delivery.nodeCache.nodeSelector",
    ):
        assert name in text, name
    account = chart().get("DaemonSet", EXCEPTION)["spec"]["template"]["spec"]["serviceAccountName"]
    assert ACCOUNT_PHRASE[page].format(account=account) in text
    for shell in re.findall(r"^```shell\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        for command in shell.splitlines():
            assert command.startswith(("d8 k ", "pod=$(d8 k ")), command


@pytest.mark.parametrize("page", SECTIONS)
def test_the_cache_report_example_is_what_a_node_writes(page: str) -> None:
    (example,) = [
        block
        for block in re.findall(r"^```text\n(.*?)\n^```", section(page), re.MULTILINE | re.DOTALL)
        if "limitBytes" in block
    ]
    document = json.loads(example)
    report = CacheReport(
        limit_bytes=document["limitBytes"],
        used_bytes=document["usedBytes"],
        available_bytes=document["availableBytes"],
        ready_digests=tuple(document["readyDigests"]),
    )
    written = datetime.datetime.fromisoformat(document["updatedAt"])
    assert report.annotation(now=written) == example
    assert report.limit_bytes == report.used_bytes + report.available_bytes
