"""Start a materialize Job (with a fresh delivery token in its Secret) when a slot is free, or
remove a finished one: a failed one before its successor starts, a succeeded one once the claim
records what it copied."""

from __future__ import annotations

from ai_models.controller.delivery.jobs import job_name, materialize_job, registry_secret, token_secret
from ai_models.controller.delivery.observe import Subject
from ai_models.controller.delivery.steps.context import StepContext
from ai_models.domain.delivery import token
from ai_models.domain.delivery.decision import StartMaterialization
from ai_models.domain.delivery.materialization import MaterializationRequest, RequestedArtifact


def slot_of(namespace: str, job: str) -> str:
    """How the slot keeper names a materialize Job (`slots.namespaced_job_name`)."""
    return f"{namespace}/{job}"


def start_materialization(start: StartMaterialization, *, ctx: StepContext, subject: Subject) -> bool:
    """Create the Job and its token Secret; False when the last slot went to another workload
    between the observation and now (nothing is created then)."""
    workload = subject.seen.workload
    claim = subject.seen.claim
    if claim is None or claim.name != start.claim:
        raise ValueError(f"{subject.key}: materialization of {start.claim} without that claim observed")
    name = job_name(start.claim)
    slot = slot_of(workload.namespace, name)
    taken, _ = ctx.slots.acquire(slot)
    if not taken:
        ctx.notify.waiting_for_slot(subject.key)
        return False
    try:
        request = MaterializationRequest(
            api_url=ctx.settings.api_url,
            target_dir=ctx.settings.claim_mount,
            artifacts=tuple(
                RequestedArtifact.of(item.key.name, item.key, item.digest) for item in start.models
            ),
            ca_bundle=ctx.settings.ca_bundle,
        )
        credentials = ctx.registry_credentials()
        job = materialize_job(
            ctx.materializer_template(),
            workload=workload,
            claim=start.claim,
            claim_uid=claim.uid,
            request=request,
            limits=ctx.settings.limits,
            pull_secret=credentials is not None,
        )
        grant = token.DeliveryGrant(
            workload=token.Workload(
                kind=str(workload.kind), namespace=workload.namespace, name=workload.name, uid=workload.uid
            ),
            artifacts=tuple(token.GrantedArtifact(ref=item.key, digest=item.digest) for item in start.models),
            expires_at=ctx.clock() + ctx.settings.token_lifetime,
        )
        issued = token.issue(grant, key=ctx.signing_keys.key())
        created = ctx.objects.create_job(job)
        try:
            # Both owned by the Job, so they go with it once the claim records the copy. Created
            # after it (they need its uid): the kubelet retries a pull and a variable's Secret.
            ctx.objects.put_secret(token_secret(created, workload=workload, token=issued))
            if credentials is not None:
                ctx.objects.put_secret(registry_secret(created, workload=workload, docker_config=credentials))
        except Exception:
            ctx.objects.delete_job(workload.namespace, name)  # it would wait for its token forever
            raise
    except Exception:
        ctx.slots.release(slot)
        raise
    return True


def remove_job(*, ctx: StepContext, subject: Subject) -> None:
    """Delete the observed Job (a failed one before its successor, a finished one whose copy the
    claim records); its Pods and Secrets go with it."""
    job = subject.job
    if job is None:
        return
    meta = job["metadata"]
    ctx.slots.ended(str(meta.get("uid") or ""))
    ctx.objects.delete_job(str(meta["namespace"]), str(meta["name"]))
