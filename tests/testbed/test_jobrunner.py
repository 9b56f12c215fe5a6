"""The test bed's Job runner: module-image Jobs run as local processes with Pod and Job status as
the Job controller and the kubelet report them (see testbed.jobrunner)."""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from kubeemu.cluster import Cluster
from kubeemu.pytest_fixtures import RunningEmulator
from support.values import IMAGE_DIGEST
from testbed.jobrunner import JobRunner, expand, finished
from testbed.module import TERMINATION_MESSAGE_ENV, module_image, module_job_runner
from testbed.volumes import StorageClassBehaviour, VolumeProvisioner

FAKE_PUBLISHER = Path(__file__).parent / "fake_publisher.py"
NAMESPACE = "default"
ACCOUNT = "publisher"


@pytest.fixture
def runner(kube_emulator: RunningEmulator) -> Iterator[JobRunner]:
    """A runner that also runs `fake-publisher` (this directory's stand-in for `ai-models publish`)."""
    add_service_account(kube_emulator.cluster)
    with module_job_runner(kube_emulator, commands={"fake-publisher": FAKE_PUBLISHER}) as started:
        yield started


def add_service_account(cluster: Cluster, name: str = ACCOUNT, namespace: str = NAMESPACE) -> None:
    cluster.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}}
    )


def job(
    name: str,
    *command: str,
    args: list[str] | None = None,
    env: list[dict[str, Any]] | None = None,
    env_from: list[dict[str, Any]] | None = None,
    image: str | None = None,
    backoff_limit: int | None = 0,
    policy: str = "FallbackToLogsOnError",
    account: str = ACCOUNT,
    **spec: Any,
) -> dict[str, Any]:
    """A Job shaped like the controller's publish Jobs."""
    container: dict[str, Any] = {
        "name": "publish",
        "image": image or module_image(),
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": policy,
        "env": [{"name": TERMINATION_MESSAGE_ENV, "value": "/dev/termination-log"}, *(env or [])],
    }
    if command:
        container["command"] = list(command)
    if args is not None:
        container["args"] = args
    if env_from:
        container["envFrom"] = env_from
    body: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "ai-models-publisher"}},
                "spec": {"serviceAccountName": account, "restartPolicy": "Never", "containers": [container]},
            },
            **spec,
        },
    }
    if backoff_limit is not None:
        body["spec"]["backoffLimit"] = backoff_limit
    return body


def terminated(pod: Mapping[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = pod["status"]["containerStatuses"][0]["state"]
    return dict(state["terminated"])


def phases(pods: list[dict[str, Any]]) -> list[str]:
    return [p["status"].get("phase", "") for p in pods]


def condition_types(job_object: Mapping[str, Any]) -> list[str]:
    return [c["type"] for c in job_object["status"].get("conditions", []) if c["status"] == "True"]


def test_module_image_is_the_rendered_controller_image() -> None:
    assert module_image() == f"registry.deckhouse.io/deckhouse/ce@{IMAGE_DIGEST}"


def test_ai_models_version_runs_to_complete_with_job_and_pod_status(
    kube_emulator: RunningEmulator, job_runner: JobRunner
) -> None:
    add_service_account(kube_emulator.cluster)
    created = kube_emulator.cluster.apply(job("version", "ai-models", args=["version"]))

    done = job_runner.wait_for_job("version", condition="Complete")

    status = done["status"]
    assert condition_types(done) == ["SuccessCriteriaMet", "Complete"]
    assert {c["reason"] for c in status["conditions"]} == {"CompletionsReached"}
    assert status["succeeded"] == 1
    assert "failed" not in status
    assert "active" not in status
    assert status["ready"] == 0
    assert status["startTime"] <= status["completionTime"]
    # Status went through the status subresource: the spec's generation never moved.
    assert done["metadata"]["generation"] == created["metadata"]["generation"] == 1

    [pod] = job_runner.pods("version")
    meta = pod["metadata"]
    assert re.fullmatch(r"version-[bcdfghjklmnpqrstvwxz2456789]{5}", meta["name"])
    assert meta["labels"] == {
        "app": "ai-models-publisher",
        "batch.kubernetes.io/controller-uid": created["metadata"]["uid"],
        "batch.kubernetes.io/job-name": "version",
        "controller-uid": created["metadata"]["uid"],
        "job-name": "version",
    }
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "version",
            "uid": created["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert pod["status"]["phase"] == "Succeeded"
    assert pod["status"]["startTime"]
    end = terminated(pod)
    assert (end["exitCode"], end["reason"]) == (0, "Completed")
    assert "message" not in end  # the file stayed empty and the fallback is for failures only
    assert end["startedAt"] <= end["finishedAt"]
    assert pod["status"]["containerStatuses"][0]["image"] == module_image()
    assert job_runner.log(meta["name"]).strip() == "ai-models 0.1.0"


def test_a_running_pod_and_job_report_running_and_ready(runner: JobRunner, tmp_path: Path) -> None:
    runner.cluster.apply(job("sleeper", "fake-publisher", args=["sleep", "--marker", str(tmp_path / "m")]))
    [pod] = runner.wait_for_pods("sleeper", predicate=lambda pods: phases(pods) == ["Running"])
    runner.wait_for_log(pod["metadata"]["name"], "sleeping")

    status = pod["status"]
    container = status["containerStatuses"][0]
    assert container["ready"] is True
    assert container["started"] is True
    assert set(container["state"]) == {"running"}
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"
    running = runner.wait_for_job("sleeper", condition=lambda j: j["status"].get("ready") == 1)
    assert running["status"]["active"] == 1
    assert running["status"]["startTime"]
    assert not condition_types(running)


def test_env_is_resolved_like_the_kubelet_and_nothing_leaks_from_the_test_process(
    runner: JobRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AI_MODELS_LEAK", "from the test process")
    cluster = runner.cluster
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s3", "namespace": NAMESPACE},
            "stringData": {"accessKey": "AKIA", "secretKey": "s3cr3t"},
        }
    )
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": NAMESPACE},
            "data": {"AI_MODELS_LOG_LEVEL": "Debug", "not a name": "skipped"},
        }
    )
    env: list[dict[str, Any]] = [
        {"name": "PLAIN", "value": "plain"},
        {"name": "EXPANDED", "value": "$(PLAIN)-$(UNDEFINED)-$$(PLAIN)"},
        {"name": "ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "accessKey"}}},
        {
            "name": "ABSENT",
            "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k", "optional": True}},
        },
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "ACCOUNT", "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}},
    ]
    env_from: list[dict[str, Any]] = [
        {"secretRef": {"name": "s3"}, "prefix": "S3_"},
        {"configMapRef": {"name": "settings"}},
        {"secretRef": {"name": "optional-missing", "optional": True}},
    ]
    cluster.apply(job("env", "fake-publisher", "env", env=env, env_from=env_from))
    runner.wait_for_job("env")

    [pod] = runner.pods("env")
    name = pod["metadata"]["name"]
    seen = json.loads(runner.log(name))
    assert {key: seen.get(key) for key in (*(e["name"] for e in env), "S3_accessKey", "S3_secretKey")} == {
        "PLAIN": "plain",
        "EXPANDED": "plain-$(UNDEFINED)-$(PLAIN)",
        "ACCESS_KEY": "AKIA",
        "ABSENT": None,
        "POD_NAME": name,
        "POD_NAMESPACE": NAMESPACE,
        "ACCOUNT": ACCOUNT,
        "S3_accessKey": "AKIA",
        "S3_secretKey": "s3cr3t",
    }
    assert seen["AI_MODELS_LOG_LEVEL"] == "Debug"  # from the ConfigMap, not from the test process
    assert "not a name" not in seen
    assert "AI_MODELS_LEAK" not in seen
    assert seen["PATH"] == os.environ["PATH"]
    assert seen["HOSTNAME"] == name
    # The runner's one app-specific knob: the termination file instead of /dev/termination-log.
    run = runner.pod_run(name)
    assert seen[TERMINATION_MESSAGE_ENV] == str(run.termination_path)
    assert seen["KUBECONFIG"] == str(run.directory / "kubeconfig")


def test_claim_mount_paths_in_env_and_args_point_at_the_volume_directory_once_bound(
    runner: JobRunner, kube_emulator: RunningEmulator
) -> None:
    slow = StorageClassBehaviour("slow", never_binds=True)
    with VolumeProvisioner(kube_emulator, classes=[slow]) as volumes:
        runner.cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": "target", "namespace": NAMESPACE},
                "spec": {
                    "storageClassName": "slow",
                    "accessModes": ["ReadWriteMany"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
        )
        env = [
            {"name": "TARGET", "value": "/data/claim"},
            {"name": "NESTED", "value": "$(TARGET)/staging/a"},
            {"name": "NEAR", "value": "/data/claimant"},
            {"name": "SUB", "value": "/mnt/sub/file"},
        ]
        args = ["write", "--file", "/data/claim/out.txt", "--text", "hello"]
        body = job("writer", "fake-publisher", args=args, env=env)
        pod_spec = body["spec"]["template"]["spec"]
        pod_spec["volumes"] = [{"name": "claim", "persistentVolumeClaim": {"claimName": "target"}}]
        pod_spec["containers"][0]["volumeMounts"] = [
            {"name": "claim", "mountPath": "/data/claim"},
            {"name": "claim", "mountPath": "/mnt/sub", "subPath": "objects/x", "readOnly": True},
        ]
        runner.cluster.apply(body)
        [waiting] = runner.wait_for_pods(
            "writer",
            predicate=lambda pods: (
                len(pods) == 1
                and "is not bound" in str(pods[0]["status"].get("containerStatuses", [{}])[0].get("state"))
            ),
        )
        assert waiting["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"
        volumes.fix("slow")
        runner.wait_for_job("writer")
        directory = volumes.volume_directory("target")
    [pod] = runner.pods("writer")
    seen = json.loads(runner.log(pod["metadata"]["name"]))
    assert (directory / "out.txt").read_text() == "hello"
    assert seen["TARGET"] == str(directory)
    assert seen["NESTED"] == str(directory / "staging/a")
    assert seen["NEAR"] == "/data/claimant"
    assert seen["SUB"] == str(directory / "objects/x/file")
    assert (directory / "objects/x").is_dir()


def test_a_missing_secret_keeps_the_pod_pending_until_it_appears(runner: JobRunner) -> None:
    env = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "late", "key": "token"}}}]
    runner.cluster.apply(job("late", "fake-publisher", "env", env=env))

    def waiting(pods: list[dict[str, Any]]) -> bool:
        return bool(pods) and "CreateContainerConfigError" in json.dumps(pods[0]["status"])

    [pod] = runner.wait_for_pods("late", predicate=waiting)
    assert pod["status"]["phase"] == "Pending"
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"] == {
        "reason": "CreateContainerConfigError",
        "message": 'secret "late" not found',
    }
    assert "active" in runner.wait_for_job("late", condition=lambda j: "active" in j["status"])["status"]

    runner.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "late", "namespace": NAMESPACE},
            "data": {},
        }
    )
    [pod] = runner.wait_for_pods("late", predicate=lambda pods: "couldn't find key" in json.dumps(pods))
    message = pod["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
    assert message == f"couldn't find key token in Secret {NAMESPACE}/late"

    runner.cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "late", "namespace": NAMESPACE},
            "data": {"token": base64.b64encode(b"t0ken").decode()},
        }
    )
    runner.wait_for_job("late")
    [pod] = runner.pods("late")
    assert json.loads(runner.log(pod["metadata"]["name"]))["TOKEN"] == "t0ken"


def test_the_process_can_do_exactly_what_its_service_account_may(runner: JobRunner) -> None:
    cluster = runner.cluster
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "readable", "namespace": NAMESPACE},
            "data": {"k": "v"},
        }
    )
    cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "publisher", "namespace": NAMESPACE},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
        }
    )
    cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "publisher", "namespace": NAMESPACE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "publisher"},
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}],
        }
    )
    cluster.apply(
        job("api", "fake-publisher", args=["api", "--namespace", NAMESPACE, "--configmap", "readable"])
    )
    runner.wait_for_job("api")

    [pod] = runner.pods("api")
    outcome = json.loads(runner.log(pod["metadata"]["name"]).splitlines()[-1])
    assert outcome == {
        "user": f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}",
        "configmap": {"k": "v"},
        "secrets": 403,
    }


def test_a_missing_service_account_fails_the_pod_clearly(runner: JobRunner) -> None:
    runner.cluster.apply(job("orphan", "ai-models", "version", account="missing"))

    failed = runner.wait_for_job("orphan", condition="Failed")

    [pod] = runner.pods("orphan")
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["reason"] == "ServiceAccountNotFound"
    assert pod["status"]["message"] == (
        f'pods "{pod["metadata"]["name"]}" is forbidden: error looking up service account '
        f'{NAMESPACE}/missing: serviceaccount "missing" not found'
    )
    assert failed["status"]["failed"] == 1


@pytest.mark.parametrize(
    ("arguments", "policy", "expected"),
    [
        # The file wins, even on failure with FallbackToLogsOnError.
        (["--code", "1", "--message", '{"reason":"SourceNotFound"}', "--lines", "3"], "FallbackToLogsOnError",
         '{"reason":"SourceNotFound"}'),
        (["--code", "0", "--message", "published"], "File", "published"),
        # Empty file and a failure: the last 80 lines of the log.
        (["--code", "3", "--lines", "100"], "FallbackToLogsOnError",
         "".join(f"line {n:04d} \n" for n in range(21, 101))),
        # ... of which the last 2048 bytes.
        (["--code", "3", "--lines", "100", "--width", "40"], "FallbackToLogsOnError",
         "".join(f"line {n:04d} {'x' * 40}\n" for n in range(21, 101))[-2048:]),
        # Policy File, or a success, never falls back to the log.
        (["--code", "3", "--lines", "5"], "File", None),
        (["--code", "0", "--lines", "5"], "FallbackToLogsOnError", None),
        # The kubelet reads at most 4 KiB of the file.
        (["--code", "1", "--message", "m" * 5000], "File", "m" * 4096),
    ],
)  # fmt: skip
def test_termination_message_follows_the_kubelet(
    runner: JobRunner, arguments: list[str], policy: str, expected: str | None
) -> None:
    runner.cluster.apply(job("message", "fake-publisher", args=["exit", *arguments], policy=policy))
    runner.wait_for_job("message", condition=finished)
    [pod] = runner.pods("message")
    end = terminated(pod)
    assert end.get("message") == expected
    assert end["exitCode"] == int(arguments[1])
    assert end["reason"] == ("Completed" if arguments[1] == "0" else "Error")


def test_failures_retry_with_new_pods_until_the_backoff_limit_then_the_job_fails(runner: JobRunner) -> None:
    runner.cluster.apply(job("flaky", "fake-publisher", args=["exit", "--code", "2"], backoff_limit=2))

    failed = runner.wait_for_job("flaky", condition="Failed")

    assert condition_types(failed) == ["FailureTarget", "Failed"]
    assert {(c["reason"], c["message"]) for c in failed["status"]["conditions"]} == {
        ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
    }
    assert failed["status"]["failed"] == 3  # backoffLimit 2: the first Pod and two retries
    assert "succeeded" not in failed["status"]
    assert "active" not in failed["status"]
    assert "completionTime" not in failed["status"]
    pods = runner.pods("flaky")
    assert len({p["metadata"]["name"] for p in pods}) == 3
    assert [(p["status"]["phase"], terminated(p)["exitCode"]) for p in pods] == [("Failed", 2)] * 3


FAIL_ON_FINAL_EXIT = {
    "rules": [
        {
            "action": "FailJob",
            "onExitCodes": {"containerName": "publish", "operator": "In", "values": [1, 2]},
        },
        {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [0, 1, 2]}},
    ]
}


def test_pod_failure_policy_fails_the_job_at_once_on_a_listed_exit_code(runner: JobRunner) -> None:
    runner.cluster.apply(
        job(
            "final",
            "fake-publisher",
            args=["exit", "--code", "1"],
            backoff_limit=3,
            podFailurePolicy=FAIL_ON_FINAL_EXIT,
        )
    )
    failed = runner.wait_for_job("final", condition="Failed")
    assert failed["status"]["failed"] == 1
    assert {c["reason"] for c in failed["status"]["conditions"]} == {"PodFailurePolicy"}
    assert "matching FailJob rule at index 0" in failed["status"]["conditions"][-1]["message"]
    assert len(runner.pods("final")) == 1


def test_pod_failure_policy_counts_other_exit_codes_against_the_backoff_limit(runner: JobRunner) -> None:
    runner.cluster.apply(
        job(
            "counted",
            "fake-publisher",
            args=["exit", "--code", "3"],
            backoff_limit=1,
            podFailurePolicy=FAIL_ON_FINAL_EXIT,
        )
    )
    failed = runner.wait_for_job("counted", condition="Failed")
    assert {c["reason"] for c in failed["status"]["conditions"]} == {"BackoffLimitExceeded"}
    assert failed["status"]["failed"] == 2


def test_backoff_limit_defaults_to_six(runner: JobRunner) -> None:
    runner.cluster.apply(
        job("default-limit", "fake-publisher", args=["exit", "--code", "1"], backoff_limit=None)
    )
    failed = runner.wait_for_job("default-limit", condition="Failed", timeout=60)
    assert failed["status"]["failed"] == 7
    assert len(runner.pods("default-limit")) == 7


def test_kill_is_a_dead_node_exit_code_137_and_the_job_retries(runner: JobRunner, tmp_path: Path) -> None:
    runner.cluster.apply(
        job("killed", "fake-publisher", args=["sleep", "--marker", str(tmp_path / "m")], backoff_limit=1)
    )
    [first] = runner.wait_for_pods("killed")
    runner.wait_for_log(first["metadata"]["name"], "sleeping")
    # The container wrote a message before dying; a dead node reports none.
    Path(runner.pod_run(first["metadata"]["name"]).termination_path).write_text("half-way")

    assert runner.kill("killed") == first["metadata"]["name"]

    done = runner.wait_for_job("killed", condition="Complete")
    assert (done["status"]["failed"], done["status"]["succeeded"]) == (1, 1)
    killed, retried = runner.pods("killed")
    assert killed["metadata"]["name"] == first["metadata"]["name"]
    assert killed["status"]["phase"] == "Failed"
    end = terminated(killed)
    assert (end["exitCode"], end["reason"], end.get("message")) == (137, "Error", None)
    assert retried["status"]["phase"] == "Succeeded"
    assert runner.log(retried["metadata"]["name"]).strip() == "second run"
    with pytest.raises(LookupError):
        runner.kill("killed")


def test_active_deadline_kills_the_container_and_fails_the_job(runner: JobRunner, tmp_path: Path) -> None:
    runner.cluster.apply(
        job(
            "slow",
            "fake-publisher",
            args=["sleep", "--marker", str(tmp_path / "m")],
            backoff_limit=3,
            activeDeadlineSeconds=1,
        )
    )

    failed = runner.wait_for_job("slow", condition="Failed")

    assert condition_types(failed) == ["FailureTarget", "Failed"]
    assert {c["reason"] for c in failed["status"]["conditions"]} == {"DeadlineExceeded"}
    assert failed["status"]["conditions"][-1]["message"] == "Job was active longer than specified deadline"
    [pod] = runner.pods("slow")  # no retry after the deadline, whatever backoffLimit says
    assert (pod["status"]["phase"], terminated(pod)["exitCode"]) == ("Failed", 137)
    assert not runner.pod_run(pod["metadata"]["name"]).running()


@pytest.mark.parametrize("propagation", ["Background", "Foreground", "Orphan"])
def test_deleting_the_job_kills_its_process_and_deletes_its_pods(
    runner: JobRunner, kube_emulator: RunningEmulator, tmp_path: Path, propagation: str
) -> None:
    runner.cluster.apply(job("doomed", "fake-publisher", args=["sleep", "--marker", str(tmp_path / "m")]))
    [pod] = runner.wait_for_pods("doomed")
    name = pod["metadata"]["name"]
    runner.wait_for_log(name, "sleeping")
    run = runner.pod_run(name)
    assert run.process is not None

    kube_emulator.kubectl("delete", "job", "doomed", f"--cascade={propagation.lower()}", "--wait=false")

    assert run.process.wait(timeout=10) == -9
    kube_emulator.kubectl("wait", "--for=delete", f"pod/{name}", "--timeout=10s")
    assert not runner.pods("doomed")


def test_deleting_a_running_pod_counts_a_failure_and_starts_another(
    runner: JobRunner, tmp_path: Path
) -> None:
    runner.cluster.apply(
        job("replaced", "fake-publisher", args=["sleep", "--marker", str(tmp_path / "m")], backoff_limit=1)
    )
    [pod] = runner.wait_for_pods("replaced")
    runner.wait_for_log(pod["metadata"]["name"], "sleeping")
    pods = runner.cluster.resource("", "v1", "pods")
    assert pods is not None
    runner.cluster.delete(pods, namespace=NAMESPACE, name=pod["metadata"]["name"])

    done = runner.wait_for_job("replaced")
    assert (done["status"]["failed"], done["status"]["succeeded"]) == (1, 1)
    [retried] = runner.pods("replaced")
    assert retried["metadata"]["name"] != pod["metadata"]["name"]


def test_jobs_of_other_images_get_no_pods(runner: JobRunner) -> None:
    runner.cluster.apply(job("foreign", "sh", "-c", "true", image="busybox:1.36"))
    runner.cluster.apply(job("after", "ai-models", "version"))

    # Jobs are handled in the order the watch delivers them: once "after" is done, the others
    # were looked at and left alone.
    runner.wait_for_job("after")
    assert runner.pods("foreign") == []
    foreign = runner.cluster.get(
        runner.cluster.resource_for("batch/v1", "Job"), namespace=NAMESPACE, name="foreign"
    )
    assert "status" not in foreign or not foreign["status"]


def test_jobs_with_several_containers_get_no_pods(runner: JobRunner) -> None:
    body = job("pair", "ai-models", "version")
    containers = body["spec"]["template"]["spec"]["containers"]
    containers.append({**containers[0], "name": "second"})
    runner.cluster.apply(body)
    runner.cluster.apply(job("after", "ai-models", "version"))
    runner.wait_for_job("after")
    assert runner.pods("pair") == []


def test_a_command_the_image_has_not_is_a_start_error(runner: JobRunner) -> None:
    runner.cluster.apply(job("shell", "sh", "-c", "echo hi"))
    runner.wait_for_job("shell", condition="Failed")
    [pod] = runner.pods("shell")
    end = terminated(pod)
    assert (pod["status"]["phase"], end["exitCode"], end["reason"]) == ("Failed", 128, "StartError")
    assert end["message"] == (
        'exec: "sh": executable file not found in $PATH '
        "(the test bed's job runner runs only: ai-models, fake-publisher)"
    )


def test_without_a_command_the_image_entrypoint_ai_models_runs_the_args(runner: JobRunner) -> None:
    runner.cluster.apply(job("entrypoint", args=["version"]))
    runner.wait_for_job("entrypoint")
    [pod] = runner.pods("entrypoint")
    assert runner.log(pod["metadata"]["name"]).strip() == "ai-models 0.1.0"


def test_jobs_run_at_the_same_time(runner: JobRunner, tmp_path: Path) -> None:
    release = tmp_path / "release"
    names = [f"parallel-{n}" for n in range(3)]
    for name in names:
        runner.cluster.apply(job(name, "fake-publisher", args=["wait-for", "--release", str(release)]))
    for name in names:
        [pod] = runner.wait_for_pods(name)
        runner.wait_for_log(pod["metadata"]["name"], "waiting")  # all three wait at once

    release.touch()

    for name in names:
        runner.wait_for_job(name)


def test_paused_runner_creates_no_pods_until_resumed(runner: JobRunner) -> None:
    runner.pause_new_pods()
    runner.cluster.apply(job("held", "ai-models", "version"))
    held = runner.wait_for_job("held", condition=lambda j: bool((j.get("status") or {}).get("startTime")))
    assert "active" not in held["status"]
    assert runner.pods("held") == []

    runner.resume()

    runner.wait_for_job("held")
    assert len(runner.pods("held")) == 1


def test_close_kills_what_the_runner_started(kube_emulator: RunningEmulator, tmp_path: Path) -> None:
    add_service_account(kube_emulator.cluster)
    runner = module_job_runner(kube_emulator, commands={"fake-publisher": FAKE_PUBLISHER})
    with runner:
        runner.cluster.apply(job("left", "fake-publisher", args=["sleep", "--marker", str(tmp_path / "m")]))
        [pod] = runner.wait_for_pods("left")
        runner.wait_for_log(pod["metadata"]["name"], "sleeping")
        run = runner.pod_run(pod["metadata"]["name"])
    assert run.process is not None
    assert run.process.poll() == -9
    # Closed means no kubelet: the Pod keeps its last reported state, nothing writes any more.
    [after] = runner.pods("left")
    assert after["status"]["phase"] == "Running"


def test_kubectl_get_jobs_and_pods_shows_kubectls_columns(
    runner: JobRunner, kube_emulator: RunningEmulator
) -> None:
    runner.cluster.apply(job("good", "ai-models", "version"))
    runner.cluster.apply(job("bad", "fake-publisher", args=["exit", "--code", "1"]))
    runner.wait_for_job("good")
    runner.wait_for_job("bad", condition="Failed")

    jobs = kube_emulator.kubectl("get", "jobs").stdout.splitlines()
    assert jobs[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    rows = {line.split()[0]: line.split()[1:3] for line in jobs[1:]}
    assert rows == {"bad": ["Failed", "0/1"], "good": ["Complete", "1/1"]}

    pods = kube_emulator.kubectl("get", "pods").stdout.splitlines()
    assert pods[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    by_job = {line.split()[0].rsplit("-", 1)[0]: line.split()[1:4] for line in pods[1:]}
    assert by_job == {"bad": ["0/1", "Error", "0"], "good": ["0/1", "Completed", "0"]}


def test_expand_follows_the_kubelet() -> None:
    values = {"A": "a", "B": "b"}
    assert expand("$(A)/$(B)", values) == "a/b"
    assert expand("$$(A) $(C) $A $", values) == "$(A) $(C) $A $"
    assert expand("$(A", values) == "$(A"


def test_a_runner_without_module_parameters_knows_no_module(
    kube_emulator: RunningEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner itself is generic: the module's entry point, termination-message variable and
    withheld settings come only from `testbed.module`."""
    monkeypatch.setenv("AI_MODELS_INHERITED", "kept by a runner that withholds nothing")
    add_service_account(kube_emulator.cluster)
    image = "example.test/tool:1"
    with JobRunner(
        kube_emulator,
        image_matches=lambda candidate: candidate == image,
        commands={"fake-publisher": FAKE_PUBLISHER},
    ) as plain:
        plain.cluster.apply(job("plain-env", "fake-publisher", "env", image=image))
        plain.cluster.apply(job("no-command", image=image, args=["version"]))
        plain.wait_for_job("plain-env")
        plain.wait_for_job("no-command", condition="Failed")

        [pod] = plain.pods("plain-env")
        seen = json.loads(plain.log(pod["metadata"]["name"]))
        assert seen["AI_MODELS_INHERITED"] == "kept by a runner that withholds nothing"
        # No termination-message variable to point at the Pod's file: the Job's value stays.
        assert seen[TERMINATION_MESSAGE_ENV] == "/dev/termination-log"
        [failed] = plain.pods("no-command")
        end = terminated(failed)
        assert (end["exitCode"], end["reason"]) == (128, "StartError")
        assert "no command specified" in end["message"]
