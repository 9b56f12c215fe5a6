"""Write the delivery report: the two annotations on the workload, only when they change, and an
Event with the same reason then (none when the report is removed)."""

from __future__ import annotations

from ai_models.controller.delivery.steps.context import StepContext
from ai_models.controller.delivery.strategy import Subject
from ai_models.domain.delivery.report import REPORT_ANNOTATIONS, DeliveryReport, changed


def write_report(report: DeliveryReport | None, *, ctx: StepContext, subject: Subject) -> None:
    if not changed(subject.seen.annotations, report):
        return
    workload = subject.seen.workload
    values: dict[str, str | None] = (
        dict(report.annotations()) if report is not None else dict.fromkeys(REPORT_ANNOTATIONS)
    )
    ctx.workloads.merge_annotations(str(workload.kind), workload.namespace, workload.name, annotations=values)
    if report is not None and ctx.events is not None:
        ctx.events.record(
            subject.obj, type_=report.event_type, reason=report.reason.value, message=report.message
        )
