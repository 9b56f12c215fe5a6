"""What one reconcile of a Model or ClusterModel does next (`domain.models.decision`): one test per
rule, and a check that the rules reach every phase and every Model reason of ARCHITECTURE.md §4."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest

from ai_models.domain.models import decision as d
from ai_models.domain.models.plan import AwaitingUpload, Deferred, Plan, Refused
from ai_models.domain.models.source import catalog_source_of
from ai_models.domain.models.status import FAILURE_REASONS
from ai_models.domain.publication.outcome import PublicationOutcome
from ai_models.domain.publication.request import UploadPublication
from ai_models.names import ModelKind, ModelPhase, ModelReason, SourceType

NOW = datetime.datetime(2026, 12, 1, 22, 0, tzinfo=datetime.UTC)
SECOND = datetime.timedelta(seconds=1)
POLICY = d.Policy(retry_seconds=300, upload_token_ttl=datetime.timedelta(hours=1), upload_poll_seconds=3)
PLAN = Plan(
    resolved_type=SourceType.HUGGING_FACE,
    revision="abc",
    digest="sha256:" + "0" * 64,
    size_bytes=10,
    source=UploadPublication(),
)
DIGEST = "sha256:" + "1" * 64
SECRET = d.Dependency(d.DependencyKind.SECRET, "hf-token", "")
SOURCE = d.Dependency(d.DependencyKind.MODEL_CATALOG_SOURCE, "hub", "")
NEW = d.ModelObservation(kind=ModelKind.MODEL, generation=1)
PUBLISHING = dataclasses.replace(
    NEW, observed_generation=1, phase=ModelPhase.PUBLISHING, artifact_reason=ModelReason.PUBLISHING
)
READY = dataclasses.replace(
    NEW, observed_generation=1, phase=ModelPhase.READY, artifact_reason=ModelReason.ARTIFACT_PUBLISHED
)


def failed(reason: ModelReason = ModelReason.SOURCE_NOT_FOUND, **changes: Any) -> d.ModelObservation:
    seen = dataclasses.replace(
        NEW,
        observed_generation=1,
        phase=ModelPhase.FAILED,
        artifact_reason=reason,
        artifact_message="acme/x at revision main was not found",
        failed_attempts=0,
        last_failure=NOW - 10 * SECOND,
    )
    return dataclasses.replace(seen, **changes)


def job(phase: d.JobPhase, **changes: Any) -> d.JobSeen:
    return dataclasses.replace(d.JobSeen(phase, DIGEST), **changes)


def decide(seen: d.ModelObservation) -> d.Action:
    return d.decide(seen, policy=POLICY, now=NOW)


def after_plan(seen: d.ModelObservation, outcome: Any, step: d.PlanPublication | None = None) -> d.Action:
    return d.decide_after_plan(seen, outcome, step=step or d.PlanPublication(), policy=POLICY, now=NOW)


# ----- lifecycle -----------------------------------------------------------------------------------


def test_new_object_gets_the_finalizer_first() -> None:
    assert decide(dataclasses.replace(NEW, has_finalizer=False)) == d.AddFinalizer()


def test_new_object_with_the_finalizer_is_planned() -> None:
    assert decide(NEW) == d.PlanPublication(d.Trigger.FIRST)


def test_deleted_object_with_the_finalizer_is_cleaned_up_whatever_its_job_does() -> None:
    seen = dataclasses.replace(PUBLISHING, deleting=True, job=job(d.JobPhase.RUNNING))
    assert decide(seen) == d.Delete()


def test_deleted_object_without_the_finalizer_is_left_alone() -> None:
    assert decide(dataclasses.replace(NEW, deleting=True, has_finalizer=False)) == d.Wait()


def test_ready_model_waits_for_its_next_event() -> None:
    assert decide(READY) == d.Wait(None)


def test_ready_model_with_missing_manifest_is_republished() -> None:
    seen = dataclasses.replace(READY, damage="manifest.json is missing")
    assert decide(seen) == d.RePublishDamaged("manifest.json is missing")


def test_damage_report_on_an_object_that_is_not_ready_changes_nothing() -> None:
    assert not isinstance(decide(dataclasses.replace(PUBLISHING, damage="x")), d.RePublishDamaged)


def test_damaged_object_without_a_job_is_published_again_as_damaged() -> None:
    seen = dataclasses.replace(PUBLISHING, artifact_reason=ModelReason.ARTIFACT_DAMAGED)
    step = decide(seen)
    assert step == d.PlanPublication(damaged=True)
    assert after_plan(seen, PLAN, step) == d.StartPublication(PLAN, damaged=True)


# ----- the publication Job -------------------------------------------------------------------------


def test_running_job_is_followed_without_writing() -> None:
    assert decide(dataclasses.replace(PUBLISHING, job=job(d.JobPhase.RUNNING))) == d.Wait(None)


def test_running_job_of_an_object_not_shown_publishing_shows_publishing() -> None:
    seen = dataclasses.replace(NEW, phase=ModelPhase.PENDING, job=job(d.JobPhase.RUNNING))
    assert decide(seen) == d.ShowPublishing()


def test_job_being_deleted_is_waited_for_before_a_new_one() -> None:
    assert decide(dataclasses.replace(PUBLISHING, job=job(d.JobPhase.GOING_AWAY))) == d.Wait(
        d.JOB_GONE_SECONDS
    )


def test_succeeded_job_with_its_manifest_finishes() -> None:
    seen = dataclasses.replace(PUBLISHING, job=job(d.JobPhase.SUCCEEDED, manifest=d.ManifestRead.READABLE))
    assert decide(seen) == d.Finish(DIGEST)


def test_succeeded_job_while_the_store_is_away_is_looked_at_again() -> None:
    seen = dataclasses.replace(PUBLISHING, job=job(d.JobPhase.SUCCEEDED, manifest=d.ManifestRead.UNAVAILABLE))
    assert decide(seen) == d.Wait(d.STORE_RETRY_SECONDS)


def test_succeeded_job_without_a_manifest_is_a_failed_attempt_retried() -> None:
    seen = dataclasses.replace(
        PUBLISHING,
        job=job(d.JobPhase.SUCCEEDED, manifest=d.ManifestRead.MISSING, manifest_problem="no such key"),
    )
    action = decide(seen)
    assert isinstance(action, d.RetryPublication)
    assert (action.attempt, action.digest) == (1, DIGEST)
    assert "left no readable manifest (no such key)" in action.detail


def test_temporary_job_failure_is_retried_at_once_and_counted() -> None:
    outcome = PublicationOutcome(ModelReason.PUBLICATION_FAILED, "the Hub did not answer", retryable=True)
    seen = dataclasses.replace(PUBLISHING, failed_attempts=1, job=job(d.JobPhase.FAILED, outcome=outcome))
    assert decide(seen) == d.RetryPublication(2, d.MAX_ATTEMPTS, "the Hub did not answer", DIGEST)


def test_pod_that_left_no_result_counts_as_a_temporary_failure() -> None:
    action = decide(dataclasses.replace(PUBLISHING, job=job(d.JobPhase.FAILED)))
    assert isinstance(action, d.RetryPublication)
    assert action.detail == "the publication Pod ended without a result"


def test_damaged_download_is_retried_with_an_artifact_damaged_event() -> None:
    outcome = PublicationOutcome(ModelReason.ARTIFACT_DAMAGED, "sha256 differs", retryable=True)
    action = decide(dataclasses.replace(PUBLISHING, job=job(d.JobPhase.FAILED, outcome=outcome)))
    assert isinstance(action, d.RetryPublication)
    assert action.damaged


def test_attempts_continue_from_the_status_and_the_last_one_fails() -> None:
    """failedAttempts is read back from the status: a restarted controller does not start over."""
    outcome = PublicationOutcome(ModelReason.PUBLICATION_FAILED, "the Hub did not answer", retryable=True)
    seen = dataclasses.replace(
        PUBLISHING, failed_attempts=d.MAX_ATTEMPTS - 1, job=job(d.JobPhase.FAILED, outcome=outcome)
    )
    action = decide(seen)
    assert isinstance(action, d.Fail)
    assert (action.reason, action.attempts, action.digest, action.job_ended) == (
        ModelReason.PUBLICATION_FAILED,
        d.MAX_ATTEMPTS,
        DIGEST,
        True,
    )
    assert action.requeue == POLICY.retry_seconds


def test_attempts_of_an_earlier_generation_do_not_count() -> None:
    outcome = PublicationOutcome(ModelReason.PUBLICATION_FAILED, "the Hub did not answer", retryable=True)
    seen = dataclasses.replace(
        PUBLISHING, generation=2, failed_attempts=5, job=job(d.JobPhase.FAILED, outcome=outcome)
    )
    assert decide(seen) == d.RetryPublication(1, d.MAX_ATTEMPTS, "the Hub did not answer", DIGEST)


@pytest.mark.parametrize(
    "reason", [ModelReason.SOURCE_NOT_FOUND, ModelReason.UNSUPPORTED_SOURCE, ModelReason.INSUFFICIENT_STORAGE]
)
def test_final_job_outcome_fails_with_its_own_reason(reason: ModelReason) -> None:
    outcome = PublicationOutcome(reason, "the publisher says why")
    action = decide(dataclasses.replace(PUBLISHING, job=job(d.JobPhase.FAILED, outcome=outcome)))
    assert isinstance(action, d.Fail)
    assert (action.reason, action.message, action.attempts) == (reason, "the publisher says why", 1)


def test_job_outcome_outside_the_failure_reasons_fails_as_publication_failed() -> None:
    outcome = PublicationOutcome(ModelReason.ARTIFACT_DAMAGED, "still damaged")
    action = decide(dataclasses.replace(PUBLISHING, job=job(d.JobPhase.FAILED, outcome=outcome)))
    assert isinstance(action, d.Fail)
    assert action.reason is ModelReason.PUBLICATION_FAILED


def test_upload_that_cannot_be_published_asks_for_a_new_upload_instead_of_failing() -> None:
    outcome = PublicationOutcome(ModelReason.UNSUPPORTED_SOURCE, "no weights in the archive")
    seen = dataclasses.replace(PUBLISHING, upload_source=True, job=job(d.JobPhase.FAILED, outcome=outcome))
    assert decide(seen) == d.RejectUpload(
        "no weights in the archive",
        DIGEST,
        requeue=POLICY.upload_poll_seconds,
        reason=ModelReason.UNSUPPORTED_SOURCE,
    )


# ----- planning ------------------------------------------------------------------------------------


def test_plan_starts_a_publication_when_a_slot_is_free() -> None:
    seen = dataclasses.replace(NEW, running_publications=3, max_publications=4)
    assert after_plan(seen, PLAN) == d.StartPublication(PLAN)


def test_slot_limit_defers_start() -> None:
    seen = dataclasses.replace(NEW, running_publications=4, max_publications=4)
    action = after_plan(seen, PLAN)
    assert action == d.WaitForSlot(4, 4)
    assert isinstance(action, d.WaitForSlot)
    assert action.message == "waiting for a publication slot: 4 of 4 running"
    assert action.requeue is None  # a freed slot wakes it


def test_unavailable_provider_shows_pending_and_comes_back_when_it_says() -> None:
    assert after_plan(NEW, Deferred("the Hub rate-limits us", 60)) == d.ShowPending(
        "the Hub rate-limits us", 60
    )


def test_upload_source_without_a_payload_waits_for_the_upload() -> None:
    assert after_plan(NEW, AwaitingUpload()) == d.AwaitUpload(POLICY.upload_poll_seconds)


def test_upload_url_is_kept_while_it_is_fresh() -> None:
    seen = dataclasses.replace(
        NEW, phase=ModelPhase.WAIT_FOR_UPLOAD, upload_expires_at=NOW + datetime.timedelta(minutes=30)
    )
    assert after_plan(seen, AwaitingUpload()) == d.Wait(POLICY.upload_poll_seconds)


def test_upload_url_close_to_its_expiry_is_renewed() -> None:
    seen = dataclasses.replace(
        NEW, phase=ModelPhase.WAIT_FOR_UPLOAD, upload_expires_at=NOW + datetime.timedelta(minutes=5)
    )
    assert after_plan(seen, AwaitingUpload()) == d.AwaitUpload(POLICY.upload_poll_seconds)


@pytest.mark.parametrize("reason", sorted(FAILURE_REASONS))
def test_refused_plan_fails_with_its_reason_and_records_the_dependency(reason: ModelReason) -> None:
    seen = dataclasses.replace(NEW, dependency=SOURCE, failed_attempts=2)
    action = after_plan(seen, Refused(reason, "why"))
    assert action == d.Fail(reason, "why", attempts=2, dependency=SOURCE, requeue=POLICY.retry_seconds)


def test_refusal_of_a_secret_dependant_comes_back_at_the_secret_recheck() -> None:
    seen = dataclasses.replace(NEW, dependency=SECRET)
    action = after_plan(
        seen, Refused(ModelReason.PUBLICATION_FAILED, "Secret team-a/hf-token does not exist")
    )
    assert isinstance(action, d.Fail)
    assert action.requeue == d.SECRET_RECHECK_SECONDS


def test_new_generation_starts_with_a_clean_failure_record() -> None:
    seen = dataclasses.replace(NEW, generation=2, observed_generation=1, failed_attempts=3)
    assert after_plan(seen, PLAN) == d.StartPublication(PLAN, reset_failures=True)


# ----- a Failed object ------------------------------------------------------------------------------


def test_failed_model_waits_for_retry_timer() -> None:
    assert decide(failed()) == d.RetryAfter(POLICY.retry_seconds - 10)


def test_failed_model_is_retried_when_the_timer_is_due() -> None:
    seen = failed(last_failure=NOW - datetime.timedelta(seconds=POLICY.retry_seconds))
    assert decide(seen) == d.PlanPublication(d.Trigger.RETRY_TIMER)


def test_failed_model_without_a_failure_time_waits_from_its_ready_condition() -> None:
    seen = failed(last_failure=None, ready_since=NOW - 100 * SECOND)
    assert decide(seen) == d.RetryAfter(POLICY.retry_seconds - 100)


def test_unsupported_source_is_final() -> None:
    seen = failed(
        ModelReason.UNSUPPORTED_SOURCE, last_failure=NOW - 3600 * SECOND, retry_request=d.RetryRequest(NOW)
    )
    assert decide(seen) == d.Wait(None)


def test_retry_requested_at_retries_at_once() -> None:
    seen = failed(retry_request=d.RetryRequest(at=NOW - SECOND))
    assert decide(seen) == d.PlanPublication(d.Trigger.RETRY_REQUESTED)


def test_retry_request_older_than_the_last_failure_is_already_answered() -> None:
    seen = failed(retry_request=d.RetryRequest(at=NOW - 20 * SECOND))
    assert decide(seen) == d.RetryAfter(POLICY.retry_seconds - 10)


def test_retry_request_that_is_not_a_timestamp_is_reported_in_the_message() -> None:
    seen = failed(retry_request=d.retry_request_of({"ai.deckhouse.io/retry-requested-at": "now please"}))
    action = decide(seen)
    assert isinstance(action, d.NoteBadRetryRequest)
    assert action.reason is ModelReason.SOURCE_NOT_FOUND
    assert action.message.startswith("acme/x at revision main was not found; ")
    assert "ai.deckhouse.io/retry-requested-at='now please' is not an RFC 3339 timestamp" in action.message
    assert d.RETRY_REQUEST_EXAMPLE in action.message
    assert action.requeue == POLICY.retry_seconds - 10


def test_retry_request_that_is_not_a_timestamp_is_reported_once() -> None:
    value = "yesterday"
    message = f"acme/x was not found; {d.bad_retry_request_note(value)}"
    seen = failed(retry_request=d.RetryRequest(invalid=value), artifact_message=message)
    assert decide(seen) == d.RetryAfter(POLICY.retry_seconds - 10)


def test_failure_while_the_retry_request_is_not_a_timestamp_keeps_the_note() -> None:
    seen = dataclasses.replace(NEW, retry_request=d.RetryRequest(invalid="soon"))
    action = after_plan(seen, Refused(ModelReason.SOURCE_NOT_FOUND, "not found"))
    assert isinstance(action, d.Fail)
    assert action.message == f"not found; {d.bad_retry_request_note('soon')}"


@pytest.mark.parametrize(
    "value",
    [
        "2026-12-01T21:59:59Z",
        "2026-12-01T21:59:59.5+00:00",
        "2026-12-01t21:59:59z",
        "2026-12-02T00:59:59+03:00",
    ],
)
def test_retry_request_accepts_rfc3339(value: str) -> None:
    request = d.retry_request_of({"ai.deckhouse.io/retry-requested-at": value})
    assert request.invalid is None
    assert request.at is not None
    assert abs(request.at - (NOW - SECOND)) < SECOND


@pytest.mark.parametrize("value", ["2026-12-01", "2026-12-01T21:59:59", "1764626399", "2026-13-01T00:00:00Z"])
def test_retry_request_refuses_what_is_not_rfc3339(value: str) -> None:
    assert d.retry_request_of({"ai.deckhouse.io/retry-requested-at": value}) == d.RetryRequest(invalid=value)


def test_no_retry_request_annotation_requests_nothing() -> None:
    assert (
        d.retry_request_of({})
        == d.RetryRequest()
        == d.retry_request_of({"ai.deckhouse.io/retry-requested-at": ""})
    )


def test_failed_secret_dependant_is_retried_when_the_secret_appears() -> None:
    seen = failed(
        ModelReason.PUBLICATION_FAILED,
        last_failure_dependency=SECRET,
        dependency=dataclasses.replace(SECRET, resource_version="42"),
    )
    assert decide(seen) == d.PlanPublication(d.Trigger.DEPENDENCY_CHANGED)


def test_failed_secret_dependant_is_retried_when_the_secret_changes() -> None:
    before = dataclasses.replace(SECRET, resource_version="42")
    seen = failed(
        ModelReason.PUBLICATION_FAILED,
        last_failure_dependency=before,
        dependency=dataclasses.replace(SECRET, resource_version="43"),
    )
    assert decide(seen) == d.PlanPublication(d.Trigger.DEPENDENCY_CHANGED)


def test_failed_secret_dependant_rechecks_the_secret_every_few_seconds_while_it_is_absent() -> None:
    seen = failed(ModelReason.PUBLICATION_FAILED, last_failure_dependency=SECRET, dependency=SECRET)
    assert decide(seen) == d.RetryAfter(d.SECRET_RECHECK_SECONDS)


@pytest.mark.parametrize("reason", [ModelReason.CATALOG_ENTRY_NOT_FOUND, ModelReason.SOURCE_NOT_FOUND])
def test_failed_catalog_dependant_is_retried_when_its_source_changed(reason: ModelReason) -> None:
    seen = failed(
        reason, last_failure_dependency=SOURCE, dependency=dataclasses.replace(SOURCE, resource_version="7")
    )
    assert decide(seen) == d.PlanPublication(d.Trigger.DEPENDENCY_CHANGED)


def test_failed_catalog_dependant_waits_for_the_timer_while_its_source_is_unchanged() -> None:
    seen = failed(ModelReason.CATALOG_ENTRY_NOT_FOUND, last_failure_dependency=SOURCE, dependency=SOURCE)
    assert decide(seen) == d.RetryAfter(POLICY.retry_seconds - 10)  # the source's change enqueues it


def test_failure_recorded_before_dependencies_were_is_retried_once_to_record_one() -> None:
    seen = failed(ModelReason.PUBLICATION_FAILED, last_failure_dependency=None, dependency=SECRET)
    assert decide(seen) == d.PlanPublication(d.Trigger.DEPENDENCY_CHANGED)


def test_failed_model_of_an_earlier_generation_is_retried_at_once() -> None:
    assert decide(failed(generation=2)) == d.PlanPublication(d.Trigger.NEW_GENERATION)


def test_dependency_is_recorded_as_status_and_read_back() -> None:
    recorded = dataclasses.replace(SECRET, resource_version="9")
    assert d.Dependency.from_status(recorded.to_status()) == recorded
    assert d.Dependency.from_status({"kind": "ConfigMap", "name": "x"}) is None
    assert d.Dependency.from_status(None) is None


def test_catalog_source_of_names_the_source_a_model_publishes_from() -> None:
    assert catalog_source_of({"spec": {"source": {"catalog": {"sourceName": "hub", "name": "a/b"}}}}) == "hub"
    assert catalog_source_of({"spec": {"source": {"url": "https://hf.co/a/b"}}}) is None
    assert d.catalog_source_of is catalog_source_of


# ----- coverage: every phase and every Model reason is reached by a rule ----------------------------


def shown(action: d.Action) -> tuple[set[ModelPhase], set[ModelReason]]:
    """The phases and reasons (any condition) the step of `action` writes."""
    if isinstance(action, (d.WaitForSlot, d.ShowPending)):
        return {ModelPhase.PENDING}, {ModelReason.PENDING}
    if isinstance(action, d.AwaitUpload):
        return {ModelPhase.WAIT_FOR_UPLOAD}, {ModelReason.WAITING_FOR_USER_UPLOAD, ModelReason.PENDING}
    if isinstance(action, (d.StartPublication, d.ShowPublishing, d.RePublishDamaged)):
        damaged = isinstance(action, d.RePublishDamaged) or getattr(action, "damaged", False)
        return {ModelPhase.PUBLISHING}, {ModelReason.PUBLISHING} | (
            {ModelReason.ARTIFACT_DAMAGED} if damaged else set()
        )
    if isinstance(action, d.Finish):
        # The metadata reason follows the manifest's profile (test_model_status pins both).
        return {ModelPhase.READY}, {
            ModelReason.ARTIFACT_PUBLISHED,
            ModelReason.READY,
            ModelReason.MODEL_METADATA_CALCULATED,
            ModelReason.MODEL_METADATA_PARTIAL,
        }
    if isinstance(action, (d.Fail, d.NoteBadRetryRequest)):
        return {ModelPhase.FAILED}, {action.reason, ModelReason.FAILED}
    if isinstance(action, d.Delete):
        return {ModelPhase.DELETING}, {ModelReason.PENDING}
    return set(), set()


def test_the_rules_reach_every_phase_and_every_model_reason() -> None:
    outcomes = [PublicationOutcome(reason, "x") for reason in FAILURE_REASONS]
    reached: list[d.Action] = [
        decide(dataclasses.replace(NEW, deleting=True)),
        decide(dataclasses.replace(READY, damage="gone")),
        decide(dataclasses.replace(NEW, phase=ModelPhase.PENDING, job=job(d.JobPhase.RUNNING))),
        decide(
            dataclasses.replace(PUBLISHING, job=job(d.JobPhase.SUCCEEDED, manifest=d.ManifestRead.READABLE))
        ),
        after_plan(NEW, PLAN),
        after_plan(dataclasses.replace(NEW, running_publications=1), PLAN),
        after_plan(NEW, AwaitingUpload()),
        *(after_plan(NEW, Refused(reason, "x")) for reason in FAILURE_REASONS),
        *(decide(dataclasses.replace(PUBLISHING, job=job(d.JobPhase.FAILED, outcome=o))) for o in outcomes),
    ]
    phases: set[ModelPhase] = set()
    reasons: set[ModelReason] = set()
    for action in reached:
        more_phases, more_reasons = shown(action)
        phases |= more_phases
        reasons |= more_reasons
    assert phases == set(ModelPhase)
    assert reasons == set(ModelReason)
