"""Lease-based leader election with the `kubernetes` client: exactly one replica reconciles.

The client's `LeaderElection` blocks while following, runs the leader's work in a thread, and
returns once renewing fails. We then stop the work and let the process exit: a replica that lost
the lease may have missed changes, and a fresh start as a follower is the only safe state.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable

from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class LeaseTiming:
    lease_duration: int
    renew_deadline: int
    retry_period: int


def lead_while_holding_lease(
    *,
    lease_name: str,
    namespace: str,
    identity: str,
    timing: LeaseTiming,
    work: Callable[[threading.Event], None],
) -> None:
    """Block until this replica leads, run `work(stop)` while it does, return when leadership ends.

    `work` must return soon after `stop` is set. The Lease is written through the client's default
    configuration, so the caller configures the client before calling.
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

    config = electionconfig.Config(
        LeaseLock(lease_name, namespace, identity),
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
