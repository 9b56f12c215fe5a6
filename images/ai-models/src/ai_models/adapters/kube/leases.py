"""Lease-based leader election with the `kubernetes` client: exactly one replica reconciles.

The client's `LeaderElection` blocks while following, runs the leader's work in a thread, and
returns once renewing fails. We then stop the work and let the process exit: a replica that lost
the lease may have missed changes, and a fresh start as a follower is the only safe state.

Every Lease call has a timeout, and an API server that cannot be reached counts as a failed
attempt (retried after the retry period), never as an error that ends the process: a follower
waits out an API server restart, and a leader whose renewals hang or fail gives up at its renew
deadline, as the election expects.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from ai_models.adapters.kube.request_counting import CountingApiClient, RequestObserver

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class LeaseTiming:
    lease_duration: int
    renew_deadline: int
    retry_period: int

    def request_timeout(self) -> tuple[float, float]:
        """(connect, read) of one Lease call: it ends within the renew deadline, which is shorter
        than the lease, so a hung renewal cannot keep a leader that no longer holds the lease."""
        read = max(self.renew_deadline - self.retry_period, 1)
        return float(self.retry_period), float(read)


class _LeaseApi:
    """The three Lease calls `LeaseLock` makes, with a timeout each; a failure to reach the API
    server (refused, reset, timed out) becomes the ApiException the election already treats as a
    failed attempt. One warning when the server becomes unreachable, one line when it answers again."""

    def __init__(self, api: Any, *, lease: str, timing: LeaseTiming) -> None:
        self._api = api
        self._lease = lease
        self._timing = timing
        self._unreachable = False

    def read_namespaced_lease(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self._api.read_namespaced_lease, *args, **kwargs)

    def create_namespaced_lease(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self._api.create_namespaced_lease, *args, **kwargs)

    def replace_namespaced_lease(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(self._api.replace_namespaced_lease, *args, **kwargs)

    def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("_request_timeout", self._timing.request_timeout())
        try:
            result = method(*args, **kwargs)
        except ApiException:
            self._answered()  # the server answered, if only with an error
            raise
        except (urllib3.exceptions.HTTPError, OSError) as error:
            if not self._unreachable:
                log.warning(
                    "cannot reach the Kubernetes API for the Lease; retrying",
                    extra={
                        "lease": self._lease,
                        "retry_period_seconds": self._timing.retry_period,
                        "error": str(error),
                    },
                )
            self._unreachable = True
            raise ApiException(status=0, reason=f"Kubernetes API not reachable: {error}") from error
        self._answered()
        return result

    def _answered(self) -> None:
        if self._unreachable:
            self._unreachable = False
            log.info("the Kubernetes API answers the Lease again", extra={"lease": self._lease})


def lead_while_holding_lease(
    *,
    lease_name: str,
    namespace: str,
    identity: str,
    timing: LeaseTiming,
    work: Callable[[threading.Event], None],
    observe: RequestObserver | None = None,
) -> None:
    """Block until this replica leads, run `work(stop)` while it does, return when leadership ends.

    `work` must return soon after `stop` is set. The Lease is written with (a copy of) the client's
    default configuration, so the caller configures the client before calling.
    """
    stop = threading.Event()
    began = threading.Event()
    finished = threading.Event()

    def started() -> None:
        began.set()
        log.info(
            "acquired the lease, starting to reconcile", extra={"lease": lease_name, "identity": identity}
        )
        try:
            work(stop)
        finally:
            finished.set()

    def stopped() -> None:
        log.warning("lost the lease, stopping", extra={"lease": lease_name, "identity": identity})
        stop.set()

    lock = LeaseLock(lease_name, namespace, identity)
    configuration = k8s.Configuration.get_default_copy()
    # No urllib3 retries: the election tries again every retry period, and retries inside one
    # call would multiply its timeout past the renew deadline.
    configuration.retries = 0
    lock.api_instance = _LeaseApi(
        k8s.CoordinationV1Api(CountingApiClient(configuration, observe=observe)),
        lease=lease_name,
        timing=timing,
    )
    config = electionconfig.Config(
        lock,
        lease_duration=timing.lease_duration,
        renew_deadline=timing.renew_deadline,
        retry_period=timing.retry_period,
        onstarted_leading=started,
        onstopped_leading=stopped,
    )
    log.info("waiting for the lease", extra={"lease": lease_name, "identity": identity})
    try:
        leaderelection.LeaderElection(config).run()
    finally:
        stop.set()
        if began.is_set() and not finished.wait(timeout=timing.renew_deadline):
            log.error("reconciling did not stop in time after leadership ended")
