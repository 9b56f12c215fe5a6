"""Write the pod template the decision wants (replaced whole, guarded by the resourceVersion read),
and the label that says the workload's template carries the module's part (D158)."""

from __future__ import annotations

from ai_models.controller.delivery.steps.context import StepContext
from ai_models.controller.delivery.strategy import Subject
from ai_models.domain.delivery.template import Template
from ai_models.names import DELIVERY_TEMPLATE_LABEL, DELIVERY_TEMPLATE_LABEL_VALUE


def write_template(template: Template, *, ctx: StepContext, subject: Subject) -> None:
    workload = subject.seen.workload
    ctx.workloads.replace_template(
        str(workload.kind),
        workload.namespace,
        workload.name,
        resource_version=str(subject.obj["metadata"]["resourceVersion"]),
        pointer=workload.kind.template_pointer,
        template=template,
    )


def mark_workload(marked: bool, *, ctx: StepContext, subject: Subject) -> None:
    workload = subject.seen.workload
    ctx.workloads.merge_labels(
        str(workload.kind),
        workload.namespace,
        workload.name,
        labels={DELIVERY_TEMPLATE_LABEL: DELIVERY_TEMPLATE_LABEL_VALUE if marked else None},
    )
