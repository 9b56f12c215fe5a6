"""The Job controller and the kubelet of one node, for Jobs whose image the test bed can run.

kubeemu has no controllers: a Job stays a stored object. `JobRunner` watches Jobs in the
emulator's store and, for each Job whose pod template has exactly one container with an image it
runs (`image_matches`), does what the Job controller and the kubelet would do on one node:

- creates the Pod (`generateName: <job>-`, labels `job-name`/`controller-uid` and their
  `batch.kubernetes.io/` forms, a controller ownerReference to the Job, `spec.nodeName`);
- resolves the container's environment like the kubelet: `value` with `$(VAR)` expansion,
  `valueFrom.secretKeyRef`/`configMapKeyRef`/`fieldRef`, `envFrom.secretRef`/`configMapRef`; a
  missing Secret, ConfigMap or key that is not `optional` keeps the Pod Pending with the container
  waiting in `CreateContainerConfigError` (retried every second, as the kubelet retries);
- runs the container's command and args as a LOCAL process: `commands` maps command names to local
  programs (the image's ENTRYPOINT, `entrypoint`, runs when the container has no command); anything
  else is refused with the runtime's `StartError`. The process authenticates as the Pod's
  ServiceAccount through a kubeconfig with a freshly minted token (the stand-in for the projected
  token volume), and inherits neither `KUBECONFIG` nor the test process's variables that
  `withheld_env` names (the settings of the program under test must come from the Pod spec);
- reports Pod status (Pending → Running → Succeeded/Failed with `state.terminated` and the
  termination message: the file's content, or with `FallbackToLogsOnError` after a failure with an
  empty file, the tail of the log) and Job status as Kubernetes 1.31+ does (`active`/`ready`,
  `succeeded`/`failed`, a new Pod per failure while `failed <= backoffLimit` (default 6), then
  `FailureTarget` and `Failed`/`BackoffLimitExceeded`; `SuccessCriteriaMet` then `Complete` with
  `completionTime`; `activeDeadlineSeconds` kills the running process and fails the Job with
  `DeadlineExceeded`). All status writes go through the status subresource.

A container that mounts a PersistentVolumeClaim at path P cannot have it mounted here. The runner
waits (container `ContainerCreating`, retried every second) until each mounted claim is Bound to a
volume with `spec.hostPath.path` (as `testbed.volumes` provisions them), and then rewrites every
environment value (after `$(VAR)` expansion and `valueFrom`) and every argument (and command word
after the first) that equals P or lies under `P/` to the same path under that directory (with
the mount's `subPath` appended; the longest matching P wins; a missing subPath directory is
created, as the kubelet does). Anything else that names P - a path inside a config file, a
`workingDir` - is not rewritten. That is how a program writing into a claim (the materializer)
writes into the claim's directory in tests; `testbed.mounts.pod_mounts` tells a test which
directory any pod's claim mount would show.

The kubelet would mount a file at the container's `terminationMessagePath` (`/dev/termination-log`),
which a local process cannot have. The runner creates a per-Pod file instead and, when the program
learns that path from a variable (one of `termination_message_env`), points it there,
overriding the Job's value. `testbed.module.module_job_runner` passes this module's values.

Deliberately not emulated: Jobs whose containers use another image get no Pods at all (a kubelet
without that image would leave them Pending; nothing here could run them), nor do suspended Jobs,
Jobs with init containers or several containers, and Jobs with `parallelism`/`completions` other
than 1 or Indexed completion (logged and left alone). `restartPolicy: OnFailure` is treated as
`Never` (a new Pod per retry), `podFailurePolicy` honours `onExitCodes` rules with FailJob or
Count only, the retry backoff is `backoff_seconds` (default 0; the real controller waits 10 s,
doubling) and Pods of a Job that ran out of time are kept, Failed, instead of deleted, so tests can
read them. When the Job's ServiceAccount does not exist the apiserver would refuse to create the
Pod; the runner fails the Pod with reason `ServiceAccountNotFound` and the apiserver's message
instead, so the cause shows on the Pod.

The runner reads the store in-process (a store subscription: a watch, no polling), runs each Job in
its own thread and each container in its own process, so Jobs run concurrently and nothing it does
blocks the emulator beyond the store lock of a single write.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import logging
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, TypeVar

from kubeemu import errors
from kubeemu.authn import Identity
from kubeemu.clock import rfc3339
from kubeemu.cluster import Cluster
from kubeemu.kubeconfig import kubeconfig_document, write_kubeconfig
from kubeemu.resources import ResourceType
from kubeemu.store import WatchEvent
from support.eventually import eventually
from testbed.mounts import ClaimNotReady, host_directories, rewrite_path

log = logging.getLogger("testbed.jobrunner")

DEFAULT_BACKOFF_LIMIT = 6
MAX_BACKOFF_SECONDS = 360.0
# kubelet limits (pkg/kubelet/container): the file is read up to 4 KiB; the log fallback keeps the
# last 80 lines, of which the last 2 KiB.
MAX_TERMINATION_MESSAGE_BYTES = 4096
FALLBACK_LOG_LINES = 80
FALLBACK_LOG_BYTES = 2048
START_ERROR_EXIT_CODE = 128
CONFIG_RETRY_SECONDS = 1.0
NODE_NAME = "kubeemu-node"
NODE_IP = "127.0.0.1"
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_INHERITED_EXCLUDED = ("KUBECONFIG",)

JobCondition = str | Callable[[Mapping[str, Any]], bool]
T = TypeVar("T")


class Emulator(Protocol):
    """What the runner needs of an emulator: `RunningEmulator` (tests) or `ServedCluster` (make dev)."""

    @property
    def cluster(self) -> Cluster: ...

    @property
    def url(self) -> str: ...

    @property
    def ca_pem(self) -> str | None: ...

    @property
    def workdir(self) -> Path: ...


@dataclass(frozen=True)
class ServedCluster:
    """A `Cluster` served by someone else (the dev stack's own event loop) at `url`."""

    cluster: Cluster
    url: str
    ca_pem: str | None
    workdir: Path


class _ConfigError(Exception):
    """The kubelet cannot build the container's configuration yet (CreateContainerConfigError)."""


class _StartError(Exception):
    """The runtime cannot start the container (StartError, exit code 128)."""


class _JobGone(Exception):
    """The Job was deleted (or replaced by a namesake) while the runner was writing to it."""


@dataclass(eq=False)
class _Feed:
    """A store subscriber: hands events to the runner's thread, never blocks the writer."""

    kind: str
    events: queue.SimpleQueue[tuple[str, WatchEvent] | None]

    def offer(self, event: WatchEvent) -> None:
        self.events.put((self.kind, event))


@dataclass(eq=False)
class PodRun:
    """One Pod the runner created, and the local process standing in for its container."""

    namespace: str
    name: str
    uid: str
    job: str
    directory: Path
    start_time: str
    process: subprocess.Popen[bytes] | None = None
    killed: bool = False  # runner.kill(): the node died under it
    gone: bool = False  # the Pod object was deleted: the kubelet kills its containers

    @property
    def log_path(self) -> Path:
        return self.directory / "log"

    @property
    def termination_path(self) -> Path:
        return self.directory / "termination-log"

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def sigkill(self) -> None:
        process = self.process
        if process is not None and process.poll() is None:
            # Its own session: SIGKILL to the group takes the container's children down too.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _condition(kind: str, reason: str, message: str) -> dict[str, Any]:
    moment = rfc3339()
    return {
        "type": kind,
        "status": "True",
        "lastProbeTime": moment,
        "lastTransitionTime": moment,
        "reason": reason,
        "message": message,
    }


def has_condition(job: Mapping[str, Any], kind: str) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def finished(job: Mapping[str, Any]) -> bool:
    return has_condition(job, "Complete") or has_condition(job, "Failed")


def expand(text: str, values: Mapping[str, str]) -> str:
    """The kubelet's `$(VAR)` expansion: defined names expand, `$$` escapes, the rest stays verbatim."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "$" or i + 1 >= len(text):
            out.append(char)
            i += 1
            continue
        following = text[i + 1]
        if following == "$":
            out.append("$")
            i += 2
        elif following == "(":
            end = text.find(")", i + 2)
            if end < 0:
                out.append(text[i:])
                break
            name = text[i + 2 : end]
            out.append(values[name] if name in values else text[i : end + 1])
            i = end + 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


def termination_message(termination_file: Path, log_file: Path, *, policy: str, exit_code: int) -> str | None:
    """What the kubelet puts into `state.terminated.message`."""
    content = b""
    if termination_file.exists():
        with termination_file.open("rb") as stream:
            content = stream.read(MAX_TERMINATION_MESSAGE_BYTES)
    if content:
        return content.decode("utf-8", "replace")
    if policy == "FallbackToLogsOnError" and exit_code != 0 and log_file.exists():
        lines = log_file.read_bytes().splitlines(keepends=True)[-FALLBACK_LOG_LINES:]
        tail = b"".join(lines)[-FALLBACK_LOG_BYTES:]
        return tail.decode("utf-8", "replace") or None
    return None


def _qos_class(container: Mapping[str, Any]) -> str:
    resources = container.get("resources") or {}
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    if not requests and not limits:
        return "BestEffort"
    if all(limits.get(r) and (requests.get(r) or limits[r]) == limits[r] for r in ("cpu", "memory")):
        return "Guaranteed"
    return "Burstable"


class JobRunner:
    """Runs an emulator's Jobs of the images it has as local processes; see the module docstring.

    `image_matches` picks the Jobs to run; `namespace` limits the watch (default: all namespaces);
    `commands` maps container command names to local programs (`.py` files run with this Python);
    `entrypoint` is the image's ENTRYPOINT (what runs when a container has no command);
    `termination_message_env` names the variables through which the programs learn their
    termination message path (none: no program writes a termination file); `withheld_env(name)` is True for
    the test process's variables the Pod's process must not inherit; `workdir` holds per-Pod
    directories (log, termination file, kubeconfig; default `<emulator workdir>/jobs`);
    `backoff_seconds` is the first retry delay (doubling, capped at 6 min).
    """

    def __init__(
        self,
        emulator: Emulator,
        *,
        image_matches: Callable[[str], bool],
        namespace: str | None = None,
        commands: Mapping[str, Path] | None = None,
        entrypoint: Sequence[str] = (),
        termination_message_env: Sequence[str] = (),
        withheld_env: Callable[[str], bool] = lambda name: False,
        workdir: Path | None = None,
        backoff_seconds: float = 0.0,
    ) -> None:
        self.emulator = emulator
        self.cluster = emulator.cluster
        self.image_matches = image_matches
        self.namespace = namespace
        self.commands: dict[str, Path] = dict(commands or {})
        self.entrypoint = tuple(entrypoint)
        self.termination_message_env = termination_message_env
        self.withheld_env = withheld_env
        self.workdir = workdir or emulator.workdir / "jobs"
        self.backoff_seconds = backoff_seconds
        self._jobs = self._type("batch", "v1", "jobs")
        self._pods = self._type("", "v1", "pods")
        self._secrets = self._type("", "v1", "secrets")
        self._configmaps = self._type("", "v1", "configmaps")
        self._service_accounts = self._type("", "v1", "serviceaccounts")
        self._changed = threading.Condition(threading.RLock())
        self._generation = 0  # bumped after every handled event, so waiters never miss a change
        self._closed = False
        self._paused = False
        self._runs: dict[str, _JobRun] = {}  # by Job uid
        self._left_alone: set[str] = set()
        self._pod_runs: dict[str, PodRun] = {}  # by Pod uid
        self._events: queue.SimpleQueue[tuple[str, WatchEvent] | None] = queue.SimpleQueue()
        self._feeds = [_Feed("job", self._events), _Feed("pod", self._events)]
        store = self.cluster.store
        # Subscribing and queueing the current state under the store lock: no write can slip its
        # event in ahead of the synthetic ADDED events of the objects that exist already.
        with store.lock:
            for feed, rtype in zip(self._feeds, (self._jobs, self._pods), strict=True):
                initial, _ = store.subscribe(rtype.storage_key, feed, since=None)
                for event in initial:
                    self._events.put((feed.kind, event))
        self._dispatcher = threading.Thread(target=self._dispatch, name="testbed-jobrunner", daemon=True)
        self._dispatcher.start()

    def _type(self, group: str, version: str, plural: str) -> ResourceType:
        rtype = self.cluster.resource(group, version, plural)
        assert rtype is not None, f"the emulator does not serve {plural}"
        return rtype

    # --- test controls ---------------------------------------------------------------------------

    def kill(self, job: str, namespace: str = "default") -> str:
        """SIGKILL the Job's running container, as a node dying would; returns the Pod's name.

        The Pod fails with exit code 137, reason Error and no termination message; the Job retries
        while `failed <= backoffLimit`."""
        with self._changed:
            run = self._run_named(job, namespace)
            pod = run.current if run is not None else None
            if pod is None or not pod.running():
                raise LookupError(f"Job {namespace}/{job} has no running container to kill")
            pod.killed = True
            pod.sigkill()
            return pod.name

    def pause_new_pods(self) -> None:
        """Create no new Pods until `resume()` (running ones go on): a test can act in between."""
        with self._changed:
            self._paused = True
            self._changed.notify_all()

    def resume(self) -> None:
        with self._changed:
            self._paused = False
            self._changed.notify_all()

    def pods(self, job: str, namespace: str = "default") -> list[dict[str, Any]]:
        """The Job's Pods that still exist, in the order the runner created them."""
        with self._changed:
            run = self._run_named(job, namespace)
            names = [pod.name for pod in run.pods] if run is not None else []
        found = []
        for name in names:
            with contextlib.suppress(errors.APIError):
                found.append(self.cluster.get(self._pods, namespace=namespace, name=name))
        return found

    def pod_run(self, pod: str, namespace: str = "default") -> PodRun:
        with self._changed:
            for run in self._pod_runs.values():
                if run.name == pod and run.namespace == namespace:
                    return run
        raise LookupError(f"the runner started no Pod {namespace}/{pod}")

    def log(self, pod: str, namespace: str = "default") -> str:
        """The container's output (stdout and stderr), as `kubectl logs` would show it."""
        path = self.pod_run(pod, namespace).log_path
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def wait_for_log(self, pod: str, text: str, namespace: str = "default", timeout: float = 30) -> None:
        # A file, not the API: polling it is how `kubectl logs -f` follows it too.
        eventually(
            lambda: text in self.log(pod, namespace),
            timeout=timeout,
            interval=0.05,
            message=lambda: f"{text!r} in the log of {pod}:\n{self.log(pod, namespace)[-3000:]}",
        )

    def wait_for_job(
        self, name: str, namespace: str = "default", condition: JobCondition = "Complete", timeout: float = 30
    ) -> dict[str, Any]:
        """Wait until the Job has `condition` (a condition type that is True, or a predicate)."""
        check: Callable[[Mapping[str, Any]], bool] = (
            (lambda job: has_condition(job, condition)) if isinstance(condition, str) else condition
        )
        return self._wait(lambda: self._job(name, namespace), check, timeout, what=f"Job {namespace}/{name}")

    def wait_for_pods(
        self,
        job: str,
        namespace: str = "default",
        predicate: Callable[[list[dict[str, Any]]], bool] = bool,
        timeout: float = 30,
    ) -> list[dict[str, Any]]:
        """Wait until the Job's Pods (as `pods()` lists them) satisfy `predicate`."""
        return self._wait(
            lambda: self.pods(job, namespace), predicate, timeout, what=f"Pods of Job {namespace}/{job}"
        )

    def _wait(
        self, read: Callable[[], T | None], check: Callable[[T], bool], timeout: float, *, what: str
    ) -> T:
        deadline = time.monotonic() + timeout
        while True:
            with self._changed:
                seen = self._generation
            current = read()
            if current is not None and check(current):
                return current
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out waiting for {what}; now:\n{current}\n{self._logs_summary()}")
            with self._changed:
                self._changed.wait_for(functools.partial(self._moved_on, seen), remaining)
            if self._closed:
                raise AssertionError(f"the runner was closed while waiting for {what}")

    def _moved_on(self, generation: int) -> bool:
        return self._generation != generation or self._closed

    def _job(self, name: str, namespace: str) -> dict[str, Any] | None:
        try:
            return self.cluster.get(self._jobs, namespace=namespace, name=name)
        except errors.APIError:
            return None

    def _logs_summary(self) -> str:
        with self._changed:
            pods = list(self._pod_runs.values())
        parts = []
        for pod in pods:
            text = pod.log_path.read_text(errors="replace") if pod.log_path.exists() else ""
            parts.append(f"--- log of {pod.namespace}/{pod.name}:\n{text[-1500:]}")
        return "\n".join(parts)

    def _run_named(self, job: str, namespace: str) -> _JobRun | None:
        """The newest run of the Job called `job` (a recreated Job gets a new run)."""
        matching = [r for r in self._runs.values() if r.name == job and r.namespace == namespace]
        return matching[-1] if matching else None

    # --- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop watching and SIGKILL every process started; statuses stay as they were (no kubelet)."""
        with self._changed:
            if self._closed:
                return
            self._closed = True
            runs = list(self._runs.values())
            for run in runs:
                if run.current is not None:
                    run.current.sigkill()
            self._changed.notify_all()
        for feed, rtype in zip(self._feeds, (self._jobs, self._pods), strict=True):
            self.cluster.store.unsubscribe(rtype.storage_key, feed)
        self._events.put(None)
        self._dispatcher.join(timeout=10)
        for run in runs:
            run.thread.join(timeout=10)

    def __enter__(self) -> JobRunner:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    # --- the watch -------------------------------------------------------------------------------

    def _dispatch(self) -> None:
        while True:
            item = self._events.get()
            if item is None:
                return
            kind, event = item
            try:
                if kind == "job":
                    self._on_job(event)
                else:
                    self._on_pod(event)
            except Exception:  # one bad object must not stop the runner
                log.exception("job runner: handling %s %s failed", event.type, kind)
            with self._changed:
                self._generation += 1
                self._changed.notify_all()

    def _on_job(self, event: WatchEvent) -> None:
        job = event.obj
        meta = _meta(job)
        namespace, uid = meta.get("namespace", ""), meta.get("uid", "")
        if self.namespace is not None and namespace != self.namespace:
            return
        start: _JobRun | None = None
        finished_run: _JobRun | None = None
        with self._changed:
            if self._closed:
                return
            run = self._runs.get(uid)
            if event.type == "DELETED" or meta.get("deletionTimestamp"):
                if run is not None:
                    # Deleting a Job, with any propagation, ends its containers and deletes its
                    # Pods: the run's thread does it, or this thread when the run is already over.
                    run.cancel()
                    finished_run = run if run.done else None
            elif run is None and uid not in self._left_alone:
                why = self._why_left_alone(job)
                if why:
                    self._left_alone.add(uid)
                    if not finished(job):
                        log.info("job runner: Job %s/%s left alone: %s", namespace, meta.get("name"), why)
                else:
                    start = self._runs[uid] = _JobRun(self, job)
        if finished_run is not None:
            finished_run.delete_pods()  # outside the runner's lock: the store lock comes first
        if start is not None:
            start.thread.start()

    def _why_left_alone(self, job: Mapping[str, Any]) -> str:
        spec = job.get("spec") or {}
        pod_spec = (spec.get("template") or {}).get("spec") or {}
        containers = pod_spec.get("containers") or []
        if finished(job):
            return "finished"
        if len(containers) != 1:
            return f"{len(containers)} containers (the runner runs single-container Jobs only)"
        image = str(containers[0].get("image") or "")
        if not self.image_matches(image):
            return f"image {image!r} is not one the runner has (no kubelet here has it: no Pods)"
        if spec.get("suspend"):
            return "suspended"
        if pod_spec.get("initContainers"):
            return "init containers are not emulated"
        if spec.get("completionMode") == "Indexed" or any(
            spec.get(key) not in (None, 1) for key in ("parallelism", "completions")
        ):
            return "only one Pod at a time and one completion are emulated"
        return ""

    def _on_pod(self, event: WatchEvent) -> None:
        if event.type != "DELETED" and not _meta(event.obj).get("deletionTimestamp"):
            return
        with self._changed:
            pod = self._pod_runs.get(_meta(event.obj).get("uid", ""))
            if pod is not None and not pod.gone:
                # The kubelet kills the containers of a deleted Pod; the Job controller replaces it.
                pod.gone = True
                pod.sigkill()
                self._changed.notify_all()

    # --- used by the runs ------------------------------------------------------------------------

    def _track(self, pod: PodRun) -> None:
        with self._changed:
            self._pod_runs[pod.uid] = pod

    def _pod_directory(self, namespace: str, name: str) -> Path:
        directory = self.workdir / namespace / name
        directory.mkdir(parents=True, exist_ok=True)
        return directory


class _JobRun:
    """The Job controller's and the kubelet's work for one Job, in its own thread."""

    def __init__(self, runner: JobRunner, job: Mapping[str, Any]) -> None:
        meta = _meta(job)
        self.runner = runner
        self.cluster = runner.cluster
        self.job = job
        self.namespace: str = meta["namespace"]
        self.name: str = meta["name"]
        self.uid: str = meta["uid"]
        spec = job.get("spec") or {}
        self.backoff_limit = int(spec.get("backoffLimit", DEFAULT_BACKOFF_LIMIT))
        self.deadline_seconds: int | None = spec.get("activeDeadlineSeconds")
        self.failure_rules: list[dict[str, Any]] = list(
            (spec.get("podFailurePolicy") or {}).get("rules") or []
        )
        self.last_exit_code: int | None = None  # of the last Pod that ended by itself
        self.template: dict[str, Any] = spec.get("template") or {}
        self.container: dict[str, Any] = self.template["spec"]["containers"][0]
        self.pods: list[PodRun] = []
        self.current: PodRun | None = None
        self.cancelled = False
        self.done = False
        self.deadline: float | None = None
        self.counts = {"active": 0, "ready": 0, "succeeded": 0, "failed": 0}
        self.start_time = ""
        self.conditions: list[dict[str, Any]] = []
        self.completion_time = ""
        self.thread = threading.Thread(
            target=self._main, name=f"job-{self.namespace}-{self.name}", daemon=True
        )

    # --- signals from the runner (called with the runner's lock held) -----------------------------

    def cancel(self) -> None:
        self.cancelled = True
        if self.current is not None:
            self.current.sigkill()
        self.runner._changed.notify_all()

    def _stopped(self) -> bool:
        return self.cancelled or self.runner._closed

    def _remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def _sleep(self, seconds: float | None, *, until: Callable[[], bool] = lambda: False) -> None:
        """Wait up to `seconds` (None: no limit), the Job's deadline, a cancel or `until()`."""
        remaining = self._remaining()
        limits = [s for s in (seconds, remaining) if s is not None]
        with self.runner._changed:
            self.runner._changed.wait_for(
                lambda: self._stopped() or until(), timeout=max(min(limits), 0) if limits else None
            )

    def _deadline_passed(self) -> bool:
        remaining = self._remaining()
        return remaining is not None and remaining <= 0

    # --- the controller loop ---------------------------------------------------------------------

    def _main(self) -> None:
        try:
            self._control()
        except _JobGone:
            pass
        except Exception:
            log.exception("job runner: Job %s/%s failed in the runner", self.namespace, self.name)
        finally:
            self._finish()

    def _finish(self) -> None:
        """A deleted Job (seen by the watch or by a failed write) leaves no process and no Pod behind."""
        missing = self._job_missing()  # read before taking the runner's lock (store lock first, always)
        with self.runner._changed:
            if self.runner._closed:
                return
            gone = self.cancelled or missing
            if gone:
                self.cancel()
            else:
                # From now on the watch deletes the Pods itself when the Job goes (see _on_job).
                self.done = True
        if gone:
            if self.current is not None and self.current.process is not None:
                self.current.process.wait()
            self.delete_pods()

    def _job_missing(self) -> bool:
        try:
            self._check_job()
        except _JobGone:
            return True
        return False

    def _control(self) -> None:
        self.start_time = rfc3339()
        if self.deadline_seconds is not None:
            self.deadline = time.monotonic() + float(self.deadline_seconds)
        self._write_job()
        while not self._stopped():
            with self.runner._changed:
                self.runner._changed.wait_for(
                    lambda: not self.runner._paused or self._stopped() or self._deadline_passed(),
                    timeout=self._remaining(),
                )
            if self._stopped():
                return
            if self._deadline_passed():
                self._fail("DeadlineExceeded", "Job was active longer than specified deadline")
                return
            outcome = self._attempt()
            if outcome in ("cancelled", "closed"):
                return
            self.counts.update(active=0, ready=0)
            if outcome == "succeeded":
                self.counts["succeeded"] += 1
                self._succeed()
                return
            rule = self._matching_failure_rule()
            self.counts["failed"] += 1
            if rule is not None and rule[1].get("action") == "FailJob":
                index, _ = rule
                pod_name = self.current.name if self.current else ""
                self._fail(
                    "PodFailurePolicy",
                    f"Container {self.container['name']} for pod {self.namespace}/{pod_name} failed with "
                    f"exit code {self.last_exit_code} matching FailJob rule at index {index}",
                )
                return
            if outcome == "deadline":
                self._fail("DeadlineExceeded", "Job was active longer than specified deadline")
                return
            if self.counts["failed"] > self.backoff_limit:
                self._fail("BackoffLimitExceeded", "Job has reached the specified backoff limit")
                return
            self._write_job()
            delay = min(self.runner.backoff_seconds * 2 ** (self.counts["failed"] - 1), MAX_BACKOFF_SECONDS)
            if delay > 0:
                self._sleep(delay)
            if self._deadline_passed() and not self._stopped():
                self._fail("DeadlineExceeded", "Job was active longer than specified deadline")
                return

    def _matching_failure_rule(self) -> tuple[int, dict[str, Any]] | None:
        """The first `podFailurePolicy` rule the last Pod's exit code matches (onExitCodes only)."""
        code = self.last_exit_code
        if code is None or code == 0:
            return None
        for index, rule in enumerate(self.failure_rules):
            codes = rule.get("onExitCodes") or {}
            if not codes or codes.get("containerName") not in (None, self.container["name"]):
                continue
            listed = code in (codes.get("values") or [])
            if listed == (codes.get("operator") == "In"):
                return index, rule
        return None

    def _succeed(self) -> None:
        message = "Reached expected number of succeeded pods"
        # Kubernetes 1.31+: SuccessCriteriaMet first, Complete once no Pod is left running.
        self.conditions.append(_condition("SuccessCriteriaMet", "CompletionsReached", message))
        self._write_job()
        self.completion_time = rfc3339()
        self.conditions.append(_condition("Complete", "CompletionsReached", message))
        self._write_job()

    def _fail(self, reason: str, message: str) -> None:
        # Kubernetes 1.31+: FailureTarget first, Failed once the Job's Pods are terminated.
        self.counts.update(active=0, ready=0)
        self.conditions.append(_condition("FailureTarget", reason, message))
        self._write_job()
        self.conditions.append(_condition("Failed", reason, message))
        self._write_job()

    # --- one Pod ---------------------------------------------------------------------------------

    def _attempt(self) -> str:
        """Create a Pod and run it to the end: succeeded | failed | deadline | cancelled | closed."""
        pod, obj = self._create_pod()
        self.counts.update(active=1, ready=0)
        self._write_job()
        account = obj["spec"]["serviceAccountName"]
        try:
            self.cluster.get(self.runner._service_accounts, namespace=self.namespace, name=account)
        except errors.APIError:
            # A real apiserver refuses such a Pod; failing it instead puts the cause where tests look.
            self._write_pod(
                pod,
                {
                    "phase": "Failed",
                    "reason": "ServiceAccountNotFound",
                    "message": f'pods "{pod.name}" is forbidden: error looking up service account '
                    f'{self.namespace}/{account}: serviceaccount "{account}" not found',
                    "conditions": self._pod_conditions(ready=False, started=False, reason="PodFailed"),
                    **self._base_status(pod),
                },
            )
            return "failed"
        self._write_pod(pod, self._waiting(pod, "ContainerCreating", ""))
        shown = ""
        while True:
            if pod.gone or self._stopped():
                return self._ended_without_status(pod)
            if self._deadline_passed():
                return "deadline"
            try:
                directories = host_directories(self.cluster, self.namespace, obj["spec"], self.container)
                env, argv = self._container_config(obj, directories)
                break
            except ClaimNotReady as error:
                # The kubelet waits for the volumes before it creates the container (FailedMount).
                mount_error = f"unable to mount volumes: {error}"
                if mount_error != shown:
                    shown = mount_error
                    self._write_pod(pod, self._waiting(pod, "ContainerCreating", shown))
                self._sleep(CONFIG_RETRY_SECONDS, until=lambda: pod.gone)
            except _ConfigError as error:
                if str(error) != shown:
                    shown = str(error)
                    self._write_pod(pod, self._waiting(pod, "CreateContainerConfigError", shown))
                self._sleep(CONFIG_RETRY_SECONDS, until=lambda: pod.gone)
            except _StartError as error:
                return self._terminated(pod, START_ERROR_EXIT_CODE, "StartError", str(error), "")
        identity = Identity.service_account(self.namespace, account)
        self.cluster.authn.add(identity)
        kubeconfig = write_kubeconfig(
            pod.directory / "kubeconfig",
            kubeconfig_document(
                self.runner.emulator.url,
                [("pod", identity)],
                namespaces={"pod": self.namespace},
                ca_pem=self.runner.emulator.ca_pem,
            ),
        )
        # The kubelet mounts an empty file at terminationMessagePath; this is its stand-in.
        pod.termination_path.write_bytes(b"")
        environment = {
            **{
                key: value
                for key, value in os.environ.items()
                if key not in _INHERITED_EXCLUDED and not self.runner.withheld_env(key)
            },
            "HOSTNAME": pod.name,
            **env,
            "KUBECONFIG": str(kubeconfig),
        }
        for variable in self.runner.termination_message_env:
            environment[variable] = str(pod.termination_path)
        started = rfc3339()
        with self.runner._changed:
            if pod.gone or self._stopped():
                return self._ended_without_status(pod)
            try:
                with pod.log_path.open("ab") as output:
                    pod.process = subprocess.Popen(
                        argv,
                        env=environment,
                        cwd=pod.directory,
                        stdin=subprocess.DEVNULL,
                        stdout=output,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
            except OSError as error:
                start_error = f"exec: {argv[0]!r}: {error.strerror}"
            else:
                start_error = ""
        if start_error:
            return self._terminated(pod, START_ERROR_EXIT_CODE, "StartError", start_error, "")
        self._write_pod(pod, self._running(pod, started))
        self.counts["ready"] = 1
        self._write_job()
        process = pod.process
        assert process is not None
        timed_out = False
        try:
            process.wait(timeout=self._remaining())
        except subprocess.TimeoutExpired:
            # activeDeadlineSeconds: the Job controller deletes the running Pod, its container dies.
            timed_out = True
            pod.sigkill()
            process.wait()
        if pod.gone or self._stopped():
            return self._ended_without_status(pod)
        code = process.returncode
        exit_code = 128 - code if code < 0 else code
        # A Pod killed from outside (a dead node, the deadline) matches no exit-code rule.
        self.last_exit_code = None if timed_out or pod.killed else exit_code
        if timed_out or pod.killed:
            self._terminated(pod, exit_code, "Error", None, started)
            return "deadline" if timed_out else "failed"
        message = termination_message(
            pod.termination_path,
            pod.log_path,
            policy=self.container.get("terminationMessagePolicy") or "File",
            exit_code=exit_code,
        )
        reason = "Completed" if exit_code == 0 else "Error"
        return self._terminated(pod, exit_code, reason, message, started)

    def _ended_without_status(self, pod: PodRun) -> str:
        if self.runner._closed:
            return "closed"
        if self.cancelled:
            return "cancelled"
        return "failed"  # the Pod was deleted before it finished: the Job counts a failure

    def _create_pod(self) -> tuple[PodRun, dict[str, Any]]:
        template_meta = _meta(self.template)
        labels = {
            **(template_meta.get("labels") or {}),
            "batch.kubernetes.io/controller-uid": self.uid,
            "batch.kubernetes.io/job-name": self.name,
            "controller-uid": self.uid,
            "job-name": self.name,
        }
        spec = dict(self.template.get("spec") or {})
        spec["nodeName"] = NODE_NAME  # what the scheduler's binding would set
        spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
        metadata: dict[str, Any] = {
            "generateName": f"{self.name}-",
            "namespace": self.namespace,
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": self.name,
                    "uid": self.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        }
        if template_meta.get("annotations"):
            metadata["annotations"] = dict(template_meta["annotations"])
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
        with self.cluster.store.lock:
            self._check_job()
            created = self.cluster.create(self.runner._pods, body, namespace=self.namespace).object
            meta = _meta(created)
            pod = PodRun(
                namespace=self.namespace,
                name=meta["name"],
                uid=meta["uid"],
                job=self.name,
                directory=self.runner._pod_directory(self.namespace, meta["name"]),
                start_time=rfc3339(),
            )
            # Tracked before the store lock is released, so the Pod's own deletion is never missed.
            self.runner._track(pod)
            with self.runner._changed:
                self.pods.append(pod)
                self.current = pod
        return pod, created

    def _container_config(
        self, pod: Mapping[str, Any], directories: Mapping[str, Path]
    ) -> tuple[dict[str, str], list[str]]:
        container = self.container
        values: dict[str, str] = {}
        for source in container.get("envFrom") or []:
            prefix = str(source.get("prefix") or "")
            if "secretRef" in source:
                data = self._data("Secret", source["secretRef"])
            elif "configMapRef" in source:
                data = self._data("ConfigMap", source["configMapRef"])
            else:
                raise _ConfigError(f"envFrom entry {source} is not emulated")
            for key, value in (data or {}).items():
                if _ENV_NAME.match(prefix + key):  # the kubelet skips (and reports) invalid names
                    values[prefix + key] = value
        for variable in container.get("env") or []:
            name = str(variable["name"])
            value_from = variable.get("valueFrom")
            if value_from is None:
                values[name] = expand(str(variable.get("value") or ""), values)
                continue
            resolved = self._value_from(pod, value_from)
            if resolved is not None:
                values[name] = resolved
        command = [expand(str(p), values) for p in container.get("command") or self.runner.entrypoint]
        args = [expand(str(p), values) for p in container.get("args") or []]
        if not command:
            raise _StartError("no command specified (the image has no ENTRYPOINT here)")
        # Claim mounts cannot be mounted here: what names the mount path names its directory.
        values = {name: rewrite_path(value, directories) for name, value in values.items()}
        rest = [rewrite_path(part, directories) for part in [*command[1:], *args]]
        return values, [*self._program(command[0]), *rest]

    def _program(self, name: str) -> list[str]:
        mapped = self.runner.commands.get(name)
        if mapped is not None:
            return [sys.executable, str(mapped)] if mapped.suffix == ".py" else [str(mapped)]
        known = ", ".join(sorted(self.runner.commands))
        raise _StartError(
            f'exec: "{name}": executable file not found in $PATH '
            f"(the test bed's job runner runs only: {known})"
        )

    def _data(self, kind: str, ref: Mapping[str, Any]) -> dict[str, str] | None:
        """The Secret's or ConfigMap's data as strings; None when it is missing but optional."""
        name = str(ref.get("name") or "")
        rtype = self.runner._secrets if kind == "Secret" else self.runner._configmaps
        try:
            obj = self.cluster.get(rtype, namespace=self.namespace, name=name)
        except errors.APIError as error:
            if error.code == 404 and ref.get("optional"):
                return None
            raise _ConfigError(f'{kind.lower()} "{name}" not found') from error
        if kind == "Secret":
            return {
                key: base64.b64decode(value).decode("utf-8", "surrogateescape")
                for key, value in (obj.get("data") or {}).items()
            }
        return {key: str(value) for key, value in (obj.get("data") or {}).items()}

    def _value_from(self, pod: Mapping[str, Any], source: Mapping[str, Any]) -> str | None:
        for kind, key in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
            if key in source:
                ref = source[key]
                data = self._data(kind, ref)
                if data is None:
                    return None
                if ref["key"] not in data:
                    if ref.get("optional"):
                        return None
                    raise _ConfigError(
                        f"couldn't find key {ref['key']} in {kind} {self.namespace}/{ref['name']}"
                    )
                return data[ref["key"]]
        if "fieldRef" in source:
            return self._field(pod, str(source["fieldRef"].get("fieldPath") or ""))
        raise _ConfigError(f"valueFrom {dict(source)} is not emulated")

    def _field(self, pod: Mapping[str, Any], path: str) -> str:
        meta, spec = _meta(pod), pod.get("spec") or {}
        simple = {
            "metadata.name": meta.get("name"),
            "metadata.namespace": meta.get("namespace"),
            "metadata.uid": meta.get("uid"),
            "spec.nodeName": spec.get("nodeName"),
            "spec.serviceAccountName": spec.get("serviceAccountName"),
            "status.hostIP": NODE_IP,
            "status.hostIPs": NODE_IP,
            "status.podIP": NODE_IP,
            "status.podIPs": NODE_IP,
        }
        if path in simple:
            return str(simple[path] or "")
        found = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
        if found:
            return str((meta.get(found.group(1)) or {}).get(found.group(2), ""))
        raise _ConfigError(f"fieldRef {path!r} is not emulated")

    # --- status ----------------------------------------------------------------------------------

    def _check_job(self) -> None:
        """Under the store lock: the Job still exists and is ours (not a namesake created later)."""
        try:
            current = self.cluster.get(self.runner._jobs, namespace=self.namespace, name=self.name)
        except errors.APIError as error:
            raise _JobGone from error
        if _meta(current).get("uid") != self.uid or _meta(current).get("deletionTimestamp"):
            raise _JobGone

    def _write_job(self) -> None:
        status: dict[str, Any] = {key: value for key, value in self.counts.items() if value or key == "ready"}
        status.update(startTime=self.start_time, terminating=0, uncountedTerminatedPods={})
        if self.completion_time:
            status["completionTime"] = self.completion_time
        if self.conditions:
            status["conditions"] = list(self.conditions)
        with self.cluster.store.lock:
            if self.runner._closed:
                return
            self._check_job()
            self.cluster.update(
                self.runner._jobs,
                {"metadata": {"name": self.name, "namespace": self.namespace}, "status": status},
                namespace=self.namespace,
                name=self.name,
                subresource="status",
            )

    def _write_pod(self, pod: PodRun, status: dict[str, Any]) -> None:
        with self.cluster.store.lock:
            if self.runner._closed:
                return
            try:
                current = self.cluster.get(self.runner._pods, namespace=pod.namespace, name=pod.name)
            except errors.APIError:
                return  # deleted: the watch tells the runner
            if _meta(current).get("uid") != pod.uid:
                return
            self.cluster.update(
                self.runner._pods,
                {"metadata": {"name": pod.name, "namespace": pod.namespace}, "status": status},
                namespace=pod.namespace,
                name=pod.name,
                subresource="status",
            )

    def _pod_conditions(self, *, ready: bool, started: bool, reason: str = "") -> list[dict[str, Any]]:
        moment = rfc3339()
        not_ready: dict[str, Any] = {"status": "False"}
        if reason:
            not_ready["reason"] = reason
            if reason == "ContainersNotReady":
                not_ready["message"] = f"containers with unready status: [{self.container['name']}]"
        state = {"status": "True"} if ready else not_ready
        conditions: list[dict[str, Any]] = [
            {"type": "PodReadyToStartContainers", "status": "True" if started else "False"},
            {"type": "Initialized", "status": "True"},
            {"type": "Ready", **state},
            {"type": "ContainersReady", **state},
            {"type": "PodScheduled", "status": "True"},
        ]
        return [{**c, "lastProbeTime": None, "lastTransitionTime": moment} for c in conditions]

    def _container_status(self, state: dict[str, Any], *, ready: bool, container_id: str) -> dict[str, Any]:
        image = str(self.container.get("image") or "")
        status: dict[str, Any] = {
            "name": self.container["name"],
            "image": image,
            "imageID": image if container_id else "",
            "ready": ready,
            "started": "running" in state,
            "restartCount": 0,
            "state": state,
        }
        if container_id:
            status["containerID"] = container_id
        return status

    def _base_status(self, pod: PodRun) -> dict[str, Any]:
        return {
            "hostIP": NODE_IP,
            "hostIPs": [{"ip": NODE_IP}],
            "podIP": NODE_IP,
            "podIPs": [{"ip": NODE_IP}],
            "startTime": pod.start_time,
            "qosClass": _qos_class(self.container),
        }

    def _waiting(self, pod: PodRun, reason: str, message: str) -> dict[str, Any]:
        waiting = {"reason": reason, "message": message} if message else {"reason": reason}
        state = {"waiting": waiting}
        return {
            "phase": "Pending",
            "conditions": self._pod_conditions(ready=False, started=True, reason="ContainersNotReady"),
            **self._base_status(pod),
            "containerStatuses": [self._container_status(state, ready=False, container_id="")],
        }

    def _running(self, pod: PodRun, started: str) -> dict[str, Any]:
        state = {"running": {"startedAt": started}}
        return {
            "phase": "Running",
            "conditions": self._pod_conditions(ready=True, started=True),
            **self._base_status(pod),
            "containerStatuses": [
                self._container_status(state, ready=True, container_id=self._container_id(pod))
            ],
        }

    def _terminated(
        self,
        pod: PodRun,
        exit_code: int,
        reason: str,
        message: str | None,
        started: str,
    ) -> str:
        terminated: dict[str, Any] = {"exitCode": exit_code, "reason": reason}
        if message:
            terminated["message"] = message
        terminated["startedAt"] = started or None
        terminated["finishedAt"] = rfc3339()
        terminated["containerID"] = self._container_id(pod)
        status = {
            "phase": "Succeeded" if exit_code == 0 else "Failed",
            "conditions": self._pod_conditions(ready=False, started=False, reason="PodCompleted"),
            **self._base_status(pod),
            "containerStatuses": [
                self._container_status(
                    {"terminated": terminated}, ready=False, container_id=self._container_id(pod)
                )
            ],
        }
        self._write_pod(pod, status)
        return "succeeded" if exit_code == 0 else "failed"

    @staticmethod
    def _container_id(pod: PodRun) -> str:
        return "kubeemu://" + uuid.uuid5(uuid.NAMESPACE_URL, pod.uid).hex

    def delete_pods(self) -> None:
        for pod in self.pods:
            with contextlib.suppress(errors.APIError):
                self.cluster.delete(self.runner._pods, namespace=pod.namespace, name=pod.name)
