"""Events (core/v1 and events.k8s.io/v1 share storage) and Leases with the client's leader election."""

from __future__ import annotations

import datetime
import subprocess
import sys
from typing import Any

import pytest
from kubernetes import client as typed_client

from kubeemu.pytest_fixtures import RunningEmulator
from support.eventually import eventually

# The generated client types its parameters as pydantic models; tests pass plain dicts, as
# callers do at runtime, so the client is used untyped here.
client: Any = typed_client
LEASE_DURATION = 2  # seconds, as ELECTOR configures its election

ELECTOR = """
import sys, time
from kubernetes import client
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

url, token, ca_file, identity = sys.argv[1:5]
configuration = client.Configuration()
configuration.host = url
configuration.api_key = {"authorization": token}
configuration.api_key_prefix = {"authorization": "Bearer"}
configuration.ssl_ca_cert = ca_file
client.Configuration.set_default(configuration)


def lead():
    print("LEADING", identity, flush=True)
    while True:
        time.sleep(0.2)


config = electionconfig.Config(LeaseLock("election", "default", identity), lease_duration=2,
                               renew_deadline=1.5,
                               retry_period=1, onstarted_leading=lead, onstopped_leading=None)
leaderelection.LeaderElection(config).run()
"""


def test_core_event_with_generate_name_is_listable_by_involved_object(api: Any) -> None:
    core = client.CoreV1Api(api)
    target = core.create_namespaced_config_map("default", {"metadata": {"name": "claim"}})
    for uid in (target.metadata.uid, "someone-else"):
        core.create_namespaced_event(
            "default",
            {
                "metadata": {"generateName": "claim."},
                "type": "Warning",
                "reason": "ProvisioningFailed",
                "message": "no storage",
                "involvedObject": {"kind": "ConfigMap", "name": "claim", "uid": uid, "namespace": "default"},
            },
        )
    events = core.list_namespaced_event(
        "default", field_selector=f"involvedObject.uid={target.metadata.uid}"
    ).items
    assert len(events) == 1
    assert events[0].metadata.name.startswith("claim.")
    assert events[0].reason == "ProvisioningFailed"


def test_events_k8s_io_events_share_storage_with_core_events(api: Any) -> None:
    core = client.CoreV1Api(api)
    events_api = client.EventsV1Api(api)
    events_api.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "ev1"},
            "eventTime": "2025-01-01T00:00:00.000000Z",
            "reason": "Published",
            "note": "artifact published",
            "type": "Normal",
            "action": "Publish",
            "reportingController": "ai-models",
            "reportingInstance": "controller-0",
            "regarding": {"kind": "Model", "name": "m1", "namespace": "default"},
        },
    )
    as_core = core.read_namespaced_event("ev1", "default")
    assert as_core.message == "artifact published"
    assert as_core.involved_object.name == "m1"
    listed = events_api.list_namespaced_event("default", field_selector="regarding.name=m1").items
    assert [(e.metadata.name, e.note) for e in listed] == [("ev1", "artifact published")]


def _lease_holder(api: Any) -> str | None:
    try:
        lease = client.CoordinationV1Api(api).read_namespaced_lease("election", "default")
    except client.ApiException:
        return None
    holder: str | None = lease.spec.holder_identity
    return holder


def _lease(api: Any) -> Any:
    return client.CoordinationV1Api(api).read_namespaced_lease("election", "default")


def test_leader_election_fails_over_when_the_leader_stops_renewing(
    emulator: RunningEmulator, api: Any
) -> None:
    def elector(identity: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [
                sys.executable,
                "-c",
                ELECTOR,
                emulator.url,
                emulator.superuser.token,
                str(emulator.server.ca_file),
                identity,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    first = elector("alpha")
    second = None
    try:
        eventually(lambda: _lease_holder(api) == "alpha", timeout=15, message="alpha to lead")
        assert first.stdout is not None
        assert first.stdout.readline().split() == ["LEADING", "alpha"]
        second = elector("beta")
        started = _lease(api).spec.renew_time

        def alpha_renewed_past_a_lease_duration() -> bool:
            # beta keeps trying while alpha renews: it never takes a lease renewed in time.
            lease = _lease(api)
            if lease.spec.holder_identity != "alpha":
                pytest.fail(f"{lease.spec.holder_identity} took the lease while alpha renewed it")
            return bool(lease.spec.renew_time - started > datetime.timedelta(seconds=LEASE_DURATION + 0.5))

        eventually(alpha_renewed_past_a_lease_duration, timeout=15, message="alpha's renewals")
        renewed = _lease(api)
        first.kill()
        first.wait(5)
        eventually(lambda: _lease_holder(api) == "beta", timeout=10, message="beta to take over")
        assert second.stdout is not None
        assert second.stdout.readline().split() == ["LEADING", "beta"]
        taken = client.CoordinationV1Api(api).read_namespaced_lease("election", "default")
        assert int(taken.metadata.resource_version) > int(renewed.metadata.resource_version)
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(5)
            if process is not None and process.stdout is not None:
                process.stdout.close()
