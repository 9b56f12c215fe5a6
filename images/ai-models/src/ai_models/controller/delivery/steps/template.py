"""Write the pod template the decision wants: replaced whole, guarded by the resourceVersion read."""

from __future__ import annotations

from ai_models.controller.delivery.steps.context import StepContext
from ai_models.controller.delivery.strategy import Subject
from ai_models.domain.delivery.template import Template


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
