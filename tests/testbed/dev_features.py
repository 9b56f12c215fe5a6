"""What the guides describe that the dev stack lets a newcomer try, each in its own module: the
internal lookup API over TLS with the module CA (`dev_lookup`), a storage budget (`dev_budget`),
`kubectl logs` of the Pods of the Jobs it runs (`dev_pod_logs`), and `status.upload.external`
(the controller's public upload base, here the api's own listener: the dev stack has no Ingress).
`devstack` calls these few functions; the banner's lines come from `features_help`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ai_models import names
from support.processes import ModuleProcess
from support.render import RenderedChart
from testbed.dev_budget import CAPACITY_VARIABLE, BudgetRefused, budget_env, checked_budget, with_budget
from testbed.dev_lookup import CA_FILE, LOOKUP_HOST, internal_port, lookup_env, lookup_help, lookup_url

__all__ = ["BudgetRefused", "DevFeatures", "checked_budget"]


@dataclass(frozen=True)
class DevFeatures:
    budget: str | None = None  # artifacts.capacityLimit as written (AI_MODELS_DEV_CAPACITY_LIMIT)
    lookup_port: int = 0  # the internal lookup listener's port as asked (0 = any free one)

    def settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """The module settings the chart is rendered with."""
        return with_budget(settings, self.budget)

    def api_env(self, chart: RenderedChart, *, out_dir: Path) -> dict[str, str]:
        return {**lookup_env(chart, out_dir=out_dir, port=self.lookup_port), **budget_env(self.budget)}

    def controller_env(self) -> dict[str, str]:
        return budget_env(self.budget)

    def client_env(self, *, out_dir: Path, lookup_port: int) -> dict[str, str]:
        """What the env file exports for the features (beside the stack's own variables)."""
        return {
            "AI_MODELS_DEV_MODULE_CA_FILE": str((out_dir / CA_FILE).resolve()),
            "AI_MODELS_LOOKUP_URL": lookup_url(lookup_port),
            "AI_MODELS_LOOKUP_RESOLVE": f"{LOOKUP_HOST}:{lookup_port}:127.0.0.1",
        }


def bound_lookup_port(processes: list[ModuleProcess]) -> int:
    """The port the api's internal listener bound (its start line says)."""
    api = next(p for p in processes if p.args[0] == "api")
    return internal_port(api)


def features_help(features: DevFeatures, *, out_dir: Path, lookup_port: int) -> str:
    """The banner's lines on the lookup API, Pod logs, the budget and the external upload URL."""
    budget = (
        f"The storage budget is {features.budget} ({CAPACITY_VARIABLE}, the setting artifacts.capacityLimit):"
        if features.budget
        else f"No storage budget; try one with {CAPACITY_VARIABLE}=10Mi make dev (artifacts.capacityLimit):"
    )
    lookup = lookup_help(out_dir=out_dir, port=lookup_port)
    return f"""{lookup}Logs of a publication Pod (a Job's Pods run as local processes; the output is the log):
  uid=$(kubectl get model qwen3-0-6b -n default -o jsonpath='{{.metadata.uid}}')
  kubectl -n {names.MODULE_NAMESPACE} logs job/publish-$uid -f
{budget}
  curl -s -H "Authorization: Bearer $AI_MODELS_TOKEN_USER" \\
    "$AI_MODELS_API_URL/api/catalog-import/v1/storage-summary"
  # a larger upload answers 507 InsufficientStorage, a larger Model fails InsufficientStorage
An upload's status.upload.external is the api's own URL here (a cluster's is its public domain):
  kubectl get model my-finetune -n default -o jsonpath='{{.status.upload.external}}'
"""
