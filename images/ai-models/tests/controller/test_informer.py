"""The controller's informer against the Kubernetes API emulator over HTTPS: list, watch, selectors,
resumed and expired watches, and stopping."""

from __future__ import annotations

import copy
import functools
import itertools
import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from kubernetes import client as k8s

from ai_models.adapters.kube.informer import LAST_APPLIED_ANNOTATION, Informer
from ai_models.adapters.kube.resources import JOBS, SECRETS, Lister
from ai_models.names import COMPONENT_LABEL, PUBLICATION_COMPONENT
from kubeemu.pytest_fixtures import EmulatorFactory, RunningEmulator

NAMESPACE = "d8-ai-models"
WAIT = 10.0  # bound for "promptly"; every wait ends as soon as the awaited thing happens
JOB_LABEL = f"{COMPONENT_LABEL}={PUBLICATION_COMPONENT}"

Change = tuple[str, Mapping[str, Any] | None, Mapping[str, Any] | None]


def kind_of(change: Change) -> tuple[str, str]:
    name, old, new = change
    return name, "added" if old is None else "deleted" if new is None else "modified"


class Recorder:
    """The informer's on_change: keeps every change, lets a test wait for one."""

    def __init__(self) -> None:
        self.changes: list[Change] = []
        self._condition = threading.Condition()

    def __call__(self, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        name = str((new or old or {})["metadata"]["name"])
        with self._condition:
            self.changes.append((name, old, new))
            self._condition.notify_all()

    def kinds(self) -> list[tuple[str, str]]:
        with self._condition:
            return [kind_of(change) for change in self.changes]

    def wait_for(self, *expected: tuple[str, str]) -> list[tuple[str, str]]:
        """Wait until the changes so far end with `expected` (name, kind) pairs; all changes."""

        def arrived() -> bool:
            kinds = [kind_of(change) for change in self.changes]
            return kinds[-len(expected) :] == list(expected)

        with self._condition:
            assert self._condition.wait_for(arrived, timeout=WAIT), [kind_of(c) for c in self.changes]
            return [kind_of(change) for change in self.changes]


class Calls:
    """Counts the informer's list and watch requests; can hold one back until released."""

    def __init__(self) -> None:
        self.counts = {"list": 0, "watch": 0}
        self._condition = threading.Condition()
        self._held: dict[tuple[str, int], threading.Event] = {}
        self._arrived: set[tuple[str, int]] = set()

    def wrap(self, lister: Lister) -> Lister:
        # functools.wraps keeps the signature and docstring kubernetes.watch reads the type from.
        @functools.wraps(lister)
        def call(*args: Any, **kwargs: Any) -> Any:
            kind = "watch" if kwargs.get("watch") else "list"
            with self._condition:
                self.counts[kind] += 1
                ident = (kind, self.counts[kind])
                self._arrived.add(ident)
                self._condition.notify_all()
                gate = self._held.get(ident)
            if gate is not None:
                assert gate.wait(WAIT), f"{ident} was never released"
            return lister(*args, **kwargs)

        return call

    def hold(self, kind: str, number: int) -> None:
        self._held[(kind, number)] = threading.Event()

    def release(self, kind: str, number: int) -> None:
        self._held[(kind, number)].set()

    def wait_arrived(self, kind: str, number: int) -> None:
        with self._condition:
            assert self._condition.wait_for(lambda: (kind, number) in self._arrived, timeout=WAIT)


_names = (f"informer-test-{index}" for index in itertools.count())


def thread_of(what: str) -> threading.Thread:
    [thread] = [thread for thread in threading.enumerate() if thread.name == f"informer-{what}"]
    return thread


InformerFactory = Callable[..., tuple[Informer, Recorder, str]]


@pytest.fixture
def core(kube_api_client: Any) -> k8s.CoreV1Api:
    api = k8s.CoreV1Api(kube_api_client)
    api.create_namespace({"metadata": {"name": NAMESPACE}})
    return api


@pytest.fixture
def start_informer(kube_api_client: Any) -> Iterator[InformerFactory]:
    """Start an informer (default: Secrets in NAMESPACE); every one is stopped at teardown."""
    started: list[Informer] = []

    def start(
        *, api_client: Any = None, lister: Lister | None = None, **kwargs: Any
    ) -> tuple[Informer, Recorder, str]:
        api_client = api_client or kube_api_client
        recorder = Recorder()
        what = next(_names)
        handler = kwargs.pop("on_change", recorder)
        informer = Informer(
            api_client,
            kwargs.pop("resource", SECRETS),
            lister=lister,
            namespace=NAMESPACE,
            name=what,
            **kwargs,
        )
        informer.add_handler(handler)
        started.append(informer.start())
        return informer, recorder, what

    yield start
    for informer in started:
        informer.stop()


def secret(name: str, labels: Mapping[str, str] | None = None, value: str = "v") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": dict(labels or {})}, "stringData": {"k": value}}


def relabel(core: k8s.CoreV1Api, name: str, labels: Mapping[str, str]) -> None:
    core.patch_namespaced_secret(name, NAMESPACE, {"metadata": {"labels": dict(labels)}})


# ----- list and watch ------------------------------------------------------------------------------


def test_the_initial_list_reports_every_existing_object_as_added(
    core: k8s.CoreV1Api, start_informer: InformerFactory
) -> None:
    core.create_namespaced_secret(NAMESPACE, secret("a", value="first"))
    core.create_namespaced_secret(NAMESPACE, secret("b"))
    informer, recorder, _ = start_informer()
    assert informer.wait_synced(WAIT)
    assert sorted(recorder.kinds()) == [("a", "added"), ("b", "added")]
    assert sorted(obj["metadata"]["name"] for obj in informer.objects()) == ["a", "b"]
    stored = informer.get(NAMESPACE, "a")
    assert stored is not None
    assert stored["metadata"]["namespace"] == NAMESPACE
    assert stored["data"] == {"k": "Zmlyc3Q="}  # plain JSON, as the API serves it
    [(_, _, reported)] = [change for change in recorder.changes if change[0] == "a"]
    assert reported == stored
    assert informer.get(NAMESPACE, "missing") is None


def test_creation_update_and_deletion_arrive_with_old_and_new_objects(
    core: k8s.CoreV1Api, start_informer: InformerFactory
) -> None:
    informer, recorder, _ = start_informer()
    assert informer.wait_synced(WAIT)
    assert recorder.kinds() == []

    core.create_namespaced_secret(NAMESPACE, secret("x"))
    recorder.wait_for(("x", "added"))
    relabel(core, "x", {"stage": "two"})
    recorder.wait_for(("x", "modified"))
    core.delete_namespaced_secret("x", NAMESPACE)
    assert recorder.wait_for(("x", "deleted")) == [("x", "added"), ("x", "modified"), ("x", "deleted")]

    (_, none, created), (_, before, after), (_, last, gone) = recorder.changes
    assert none is None
    assert gone is None
    assert before == created
    assert (before or {})["metadata"].get("labels") in (None, {})
    assert (after or {})["metadata"]["labels"] == {"stage": "two"}
    assert last == after
    assert informer.get(NAMESPACE, "x") is None
    assert informer.objects() == []


def test_a_label_selector_limits_the_objects_and_relabelling_moves_them_in_and_out(
    core: k8s.CoreV1Api, start_informer: InformerFactory
) -> None:
    core.create_namespaced_secret(NAMESPACE, secret("in-1", {"app": "selected"}))
    core.create_namespaced_secret(NAMESPACE, secret("out-1", {"app": "other"}))
    informer, recorder, _ = start_informer(label_selector="app=selected")
    assert informer.wait_synced(WAIT)
    assert recorder.kinds() == [("in-1", "added")]

    core.create_namespaced_secret(NAMESPACE, secret("out-2", {"app": "other"}))
    core.create_namespaced_secret(NAMESPACE, secret("in-2", {"app": "selected"}))
    recorder.wait_for(("in-2", "added"))  # out-2 came first and would have arrived before it
    relabel(core, "in-1", {"app": "other"})
    relabel(core, "out-1", {"app": "selected"})
    assert recorder.wait_for(("in-1", "deleted"), ("out-1", "added")) == [
        ("in-1", "added"),
        ("in-2", "added"),
        ("in-1", "deleted"),
        ("out-1", "added"),
    ]
    assert sorted(obj["metadata"]["name"] for obj in informer.objects()) == ["in-2", "out-1"]


def test_a_field_selector_on_the_name_follows_one_secret_only(
    core: k8s.CoreV1Api, start_informer: InformerFactory
) -> None:
    core.create_namespaced_secret(NAMESPACE, secret("other-before"))
    informer, recorder, _ = start_informer(field_selector="metadata.name=ledger")
    assert informer.wait_synced(WAIT)
    assert recorder.kinds() == []

    core.create_namespaced_secret(NAMESPACE, secret("other-after"))
    core.create_namespaced_secret(NAMESPACE, secret("ledger"))
    relabel(core, "other-before", {"touched": "yes"})
    core.delete_namespaced_secret("other-after", NAMESPACE)
    relabel(core, "ledger", {"touched": "yes"})
    assert recorder.wait_for(("ledger", "modified")) == [("ledger", "added"), ("ledger", "modified")]
    assert [obj["metadata"]["name"] for obj in informer.objects()] == ["ledger"]


def test_publication_jobs_are_followed_by_their_label(
    kube_api_client: Any, core: k8s.CoreV1Api, start_informer: InformerFactory
) -> None:
    batch = k8s.BatchV1Api(kube_api_client)

    def job(name: str, labels: Mapping[str, str]) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "labels": dict(labels)},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "publish", "image": "registry.example/ai-models:1"}],
                    }
                }
            },
        }

    informer, recorder, _ = start_informer(resource=JOBS, label_selector=JOB_LABEL)
    assert informer.wait_synced(WAIT)
    batch.create_namespaced_job(NAMESPACE, job("unrelated", {"app": "x"}))
    batch.create_namespaced_job(NAMESPACE, job("publish-1", {COMPONENT_LABEL: PUBLICATION_COMPONENT}))
    recorder.wait_for(("publish-1", "added"))
    batch.delete_namespaced_job("publish-1", NAMESPACE, propagation_policy="Background")
    assert recorder.wait_for(("publish-1", "deleted"))[0] == ("publish-1", "added")
    assert {name for name, _ in recorder.kinds()} == {"publish-1"}
    assert informer.objects() == []


def test_a_failing_change_handler_is_logged_and_loses_nothing(
    core: k8s.CoreV1Api, start_informer: InformerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """A handler bug must not cost the other objects their notifications, nor a relist."""
    core.create_namespaced_secret(NAMESPACE, secret("a-poison"))
    core.create_namespaced_secret(NAMESPACE, secret("b-listed"))
    calls = Calls()
    seen = Recorder()

    def handler(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> None:
        seen(old, new)
        if "poison" in (new or old or {})["metadata"]["name"]:
            raise RuntimeError("handler bug")

    with caplog.at_level(logging.ERROR, logger="ai_models.adapters.kube.informer"):
        informer, _, _ = start_informer(
            lister=calls.wrap(functools.partial(core.list_namespaced_secret, NAMESPACE)), on_change=handler
        )
        assert informer.wait_synced(WAIT)
        assert sorted(seen.kinds()) == [("a-poison", "added"), ("b-listed", "added")]
        core.create_namespaced_secret(NAMESPACE, secret("c-poison"))
        core.create_namespaced_secret(NAMESPACE, secret("d-watched"))
        seen.wait_for(("c-poison", "added"), ("d-watched", "added"))
    assert calls.counts["list"] == 1
    failures = [record for record in caplog.records if record.exc_info]
    assert sorted(str(getattr(record, "object", None)) for record in failures) == [
        f"{NAMESPACE}/a-poison",
        f"{NAMESPACE}/c-poison",
    ]
    assert informer.get(NAMESPACE, "c-poison") is not None


# ----- what the store keeps ------------------------------------------------------------------------------


def track_field_managers(emulator: RunningEmulator, name: str) -> None:
    """Give a stored Secret the managedFields a real API server keeps on every object (the emulator
    does not track field managers): written into the emulator's store, which serves it to lists
    and sends watchers a MODIFIED event, as after any write."""
    store = emulator.cluster.store
    with store.lock:
        stored = copy.deepcopy(store.get("/secrets", NAMESPACE, name))
        assert stored is not None
        stored["metadata"]["managedFields"] = [
            {
                "manager": "kubectl-client-side-apply",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2026-01-01T00:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {".": {}, "f:k": {}}, "f:metadata": {"f:annotations": {".": {}}}},
            }
        ]
        store.put("/secrets", stored)


def applied(name: str, **annotations: str) -> dict[str, Any]:
    """A Secret as `kubectl apply` creates it: with its last-applied-configuration annotation."""
    body = secret(name)
    last = {"apiVersion": "v1", "kind": "Secret", **body}
    body["metadata"]["annotations"] = {LAST_APPLIED_ANNOTATION: json.dumps(last), **annotations}
    return body


def assert_slim(obj: Mapping[str, Any] | None, annotations: Mapping[str, str] | None) -> None:
    assert obj is not None
    assert "managedFields" not in obj["metadata"]
    assert obj["metadata"].get("annotations") == annotations
    assert obj["data"] == {"k": "dg=="}  # the rest is kept


def test_stored_objects_keep_neither_managed_fields_nor_the_last_applied_configuration(
    kube_emulator: RunningEmulator, core: k8s.CoreV1Api, start_informer: InformerFactory
) -> None:
    core.create_namespaced_secret(NAMESPACE, applied("listed", team="a"))
    core.create_namespaced_secret(NAMESPACE, applied("listed-only-applied"))
    for name in ("listed", "listed-only-applied"):
        track_field_managers(kube_emulator, name)
    served = core.read_namespaced_secret("listed", NAMESPACE)
    assert served.metadata.managed_fields  # what the informer gets served
    assert LAST_APPLIED_ANNOTATION in served.metadata.annotations

    informer, recorder, _ = start_informer()
    assert informer.wait_synced(WAIT)
    assert_slim(informer.get(NAMESPACE, "listed"), {"team": "a"})
    assert_slim(informer.get(NAMESPACE, "listed-only-applied"), None)

    core.create_namespaced_secret(NAMESPACE, applied("watched", team="b"))
    track_field_managers(kube_emulator, "watched")
    recorder.wait_for(("watched", "added"), ("watched", "modified"))
    assert_slim(informer.get(NAMESPACE, "watched"), {"team": "b"})
    reported = [obj for _, old, new in recorder.changes for obj in (old, new) if obj is not None]
    assert len(reported) == 5  # two listed, one added, the old and new of one modification
    for obj in reported:
        assert "managedFields" not in obj["metadata"]
        assert LAST_APPLIED_ANNOTATION not in (obj["metadata"].get("annotations") or {})
    core.delete_namespaced_secret("watched", NAMESPACE)
    recorder.wait_for(("watched", "deleted"))
    _, last, gone = recorder.changes[-1]
    assert gone is None
    assert_slim(last, {"team": "b"})


# ----- resumed and expired watches ---------------------------------------------------------------------


def test_a_watch_the_server_ends_is_resumed_from_where_it_stopped_without_a_relist(
    kube_api_client: Any, core: k8s.CoreV1Api, start_informer: InformerFactory
) -> None:
    calls = Calls()
    calls.hold("watch", 2)  # the watch after the server ended the first one
    lister = calls.wrap(functools.partial(core.list_namespaced_secret, NAMESPACE))
    informer, recorder, _ = start_informer(lister=lister, watch_timeout_seconds=1)
    assert informer.wait_synced(WAIT)
    core.create_namespaced_secret(NAMESPACE, secret("during-first-watch"))
    recorder.wait_for(("during-first-watch", "added"))

    calls.wait_arrived("watch", 2)  # the first watch is over and no other is open
    core.create_namespaced_secret(NAMESPACE, secret("between-1"))
    core.create_namespaced_secret(NAMESPACE, secret("between-2"))
    relabel(core, "during-first-watch", {"changed": "between"})
    calls.release("watch", 2)

    assert recorder.wait_for(("during-first-watch", "modified")) == [
        ("during-first-watch", "added"),
        ("between-1", "added"),
        ("between-2", "added"),
        ("during-first-watch", "modified"),
    ]
    assert calls.counts["list"] == 1
    stored = informer.get(NAMESPACE, "during-first-watch")
    assert stored is not None
    assert stored["metadata"]["labels"] == {"changed": "between"}


def test_an_expired_watch_relists_and_reports_what_changed_meanwhile(
    kube_emulator_factory: EmulatorFactory, start_informer: InformerFactory
) -> None:
    emulator = kube_emulator_factory(event_log_size=3)
    api_client = emulator.api_client()
    core = k8s.CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    core.create_namespaced_secret(NAMESPACE, secret("ledger", value="old"))
    core.create_namespaced_secret(NAMESPACE, secret("doomed"))
    calls = Calls()
    calls.hold("watch", 2)
    informer, recorder, _ = start_informer(
        api_client=api_client,
        lister=calls.wrap(functools.partial(core.list_namespaced_secret, NAMESPACE)),
        label_selector="!skip",
        watch_timeout_seconds=1,
    )
    assert informer.wait_synced(WAIT)
    assert sorted(recorder.kinds()) == [("doomed", "added"), ("ledger", "added")]

    calls.wait_arrived("watch", 2)
    for index in range(5):  # more than the emulator's event log keeps: the watch cannot resume
        core.create_namespaced_secret(NAMESPACE, secret(f"noise-{index}", {"skip": "yes"}))
    core.patch_namespaced_secret("ledger", NAMESPACE, {"stringData": {"k": "new"}})
    core.delete_namespaced_secret("doomed", NAMESPACE)
    calls.release("watch", 2)

    recorder.wait_for(("doomed", "deleted"), ("ledger", "modified"))
    assert calls.counts["list"] == 2
    stored = informer.get(NAMESPACE, "ledger")
    assert stored is not None
    assert stored["data"] == {"k": "bmV3"}
    assert informer.get(NAMESPACE, "doomed") is None
    # Still watching after the relist.
    core.create_namespaced_secret(NAMESPACE, secret("later"))
    recorder.wait_for(("later", "added"))


# ----- stop ----------------------------------------------------------------------------------------


def test_stop_ends_the_thread_while_its_watch_waits_for_events(
    core: k8s.CoreV1Api, start_informer: InformerFactory
) -> None:
    informer, recorder, what = start_informer()
    assert informer.wait_synced(WAIT)
    core.create_namespaced_secret(NAMESPACE, secret("x"))
    recorder.wait_for(("x", "added"))  # the watch is open and being read
    thread = thread_of(what)
    informer.stop()
    thread.join(WAIT)  # no event, bookmark (60 s) or watch timeout (300 s) is coming
    assert not thread.is_alive()


def test_stop_during_the_initial_list_ends_the_thread_without_opening_a_watch(
    core: k8s.CoreV1Api, start_informer: InformerFactory
) -> None:
    calls = Calls()
    calls.hold("list", 1)
    informer, _, what = start_informer(
        lister=calls.wrap(functools.partial(core.list_namespaced_secret, NAMESPACE))
    )
    calls.wait_arrived("list", 1)
    thread = thread_of(what)
    informer.stop()
    calls.release("list", 1)
    thread.join(WAIT)
    assert not thread.is_alive()
    assert calls.counts["watch"] == 0
