"""kubectl 1.36 (the venv's binary) against the emulator: apply, get, get -w, wait, label, delete,
server-side validation errors, typed creates (protobuf bodies) and auth can-i."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from kubeemu.authn import Identity
from kubeemu.pytest_fixtures import KUBECTL, RunningEmulator
from support.eventually import eventually

WIDGET = """
apiVersion: example.test/v1
kind: Widget
metadata:
  name: w1
  namespace: default
spec:
  source:
    url: https://example.test/model
"""
DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - {name: a, image: "one"}
        - {name: b, image: "two"}
"""


def test_kubectl_is_the_venv_binary() -> None:
    assert KUBECTL.is_file()
    assert (
        "v1.36"
        in subprocess.run(
            [str(KUBECTL), "version", "--client"], capture_output=True, text=True, check=True
        ).stdout
    )


def test_apply_twice_then_configure_via_strategic_merge(emulator: RunningEmulator) -> None:
    first = emulator.kubectl("apply", "-f", "-", input=WIDGET + "---" + DEPLOYMENT)
    assert first.stdout.split("\n")[:2] == ["widget.example.test/w1 created", "deployment.apps/web created"]
    again = emulator.kubectl("apply", "-f", "-", input=WIDGET + "---" + DEPLOYMENT)
    assert "widget.example.test/w1 unchanged" in again.stdout
    changed = emulator.kubectl("apply", "-f", "-", input=DEPLOYMENT.replace('"two"', '"two:2"'))
    assert "deployment.apps/web configured" in changed.stdout
    images = emulator.kubectl(
        "get", "deploy", "web", "-o", "jsonpath={.spec.template.spec.containers[*].image}"
    )
    assert images.stdout == "one two:2"


def test_get_prints_printer_columns_and_categories(emulator: RunningEmulator) -> None:
    emulator.kubectl("apply", "-f", "-", input=WIDGET)
    emulator.kubectl(
        "patch",
        "widget",
        "w1",
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"phase":"Ready","conditions":[{"type":"Ready","status":"True"}]}}',
    )
    table = emulator.kubectl("get", "wdg").stdout.splitlines()
    assert table[0].split() == ["NAME", "PHASE", "SIZE", "READY", "AGE"]
    assert table[1].split()[:4] == ["w1", "Ready", "1", "True"]
    by_category = emulator.kubectl("get", "example-all", "-A").stdout
    assert "widget.example.test/w1" in by_category


def test_get_watch_streams_changes(emulator: RunningEmulator) -> None:
    emulator.kubectl("apply", "-f", "-", input=WIDGET)
    command = [
        str(KUBECTL),
        "--kubeconfig",
        str(emulator.kubeconfig()),
        "--cache-dir",
        str(emulator.workdir / "kubectl-cache"),
        "get",
        "widgets",
        "-w",
        "--request-timeout=4s",
    ]
    watcher = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert watcher.stdout is not None
        assert watcher.stdout.readline().split() == ["NAME", "PHASE", "SIZE", "READY", "AGE"]
        assert watcher.stdout.readline().split()[:2] == ["w1", "1"]
        emulator.kubectl("patch", "widget", "w1", "--type=merge", "-p", '{"spec":{"size":7}}')
        assert watcher.stdout.readline().split()[:2] == ["w1", "7"]
    finally:
        watcher.kill()
        watcher.communicate(timeout=5)


def test_wait_for_jsonpath_and_condition(emulator: RunningEmulator) -> None:
    emulator.kubectl("apply", "-f", "-", input=WIDGET)

    widgets = emulator.cluster.resource("example.test", "v1", "widgets")
    assert widgets is not None

    def become_ready() -> None:
        # Once `kubectl wait` watches (it lists first, then watches): the change reaches it by the watch.
        eventually(
            lambda: list(emulator.cluster.store.subscribers(widgets.storage_key)),
            timeout=10,
            interval=0.05,
            message="kubectl wait to watch the widget",
        )
        emulator.kubectl(
            "patch",
            "widget",
            "w1",
            "--subresource=status",
            "--type=merge",
            "-p",
            '{"status":{"phase":"Ready","conditions":[{"type":"Ready","status":"True"}]}}',
        )

    patcher = threading.Thread(target=become_ready)
    patcher.start()
    waited = emulator.kubectl("wait", "--for=jsonpath={.status.phase}=Ready", "widget/w1", "--timeout=10s")
    patcher.join()
    assert "condition met" in waited.stdout
    assert (
        "condition met"
        in emulator.kubectl("wait", "--for=condition=Ready", "widget/w1", "--timeout=5s").stdout
    )


def test_label_and_delete(emulator: RunningEmulator) -> None:
    emulator.kubectl("apply", "-f", "-", input=WIDGET)
    emulator.kubectl("label", "widget", "w1", "env=prod")
    assert (
        emulator.kubectl("get", "widgets", "-l", "env=prod", "-o", "name").stdout.strip()
        == "widget.example.test/w1"
    )
    assert emulator.kubectl("get", "widgets", "-l", "env!=prod", "-o", "name").stdout.strip() == ""
    deleted = emulator.kubectl("delete", "widget", "w1")
    assert deleted.stdout.strip() == 'widget.example.test "w1" deleted from default namespace'
    missing = emulator.kubectl("get", "widget", "w1", check=False)
    assert missing.returncode == 1
    assert 'widgets.example.test "w1" not found' in missing.stderr


def test_invalid_object_is_rejected_with_the_rule_message(emulator: RunningEmulator) -> None:
    bad = WIDGET.replace("url: https://example.test/model", "url: https://example.test/model\n    upload: {}")
    result = emulator.kubectl("apply", "-f", "-", input=bad, check=False)
    assert result.returncode == 1
    assert (
        'The Widget "w1" is invalid: spec.source: Invalid value: "object": exactly one of url, upload or '
        "catalog must be set"
    ) in result.stderr


def test_unknown_field_is_a_strict_decoding_error_without_validate_false(emulator: RunningEmulator) -> None:
    result = emulator.kubectl("apply", "-f", "-", input=WIDGET + "  bogus: 1\n", check=False)
    assert result.returncode == 1
    assert 'strict decoding error: unknown field "spec.bogus"' in result.stderr
    warned = emulator.kubectl("apply", "--validate=warn", "-f", "-", input=WIDGET + "  bogus: 1\n")
    assert 'unknown field "spec.bogus"' in warned.stderr
    assert "bogus" not in emulator.kubectl("get", "widget", "w1", "-o", "yaml").stdout.split("spec:")[1]


def test_typed_creates_send_protobuf_and_work(emulator: RunningEmulator) -> None:
    emulator.kubectl("create", "namespace", "team")
    emulator.kubectl("create", "configmap", "settings", "-n", "team", "--from-literal=a=b")
    emulator.kubectl("create", "secret", "generic", "creds", "-n", "team", "--from-literal=token=s3cret")
    emulator.kubectl("create", "serviceaccount", "bot", "-n", "team")
    emulator.kubectl("create", "role", "reader", "-n", "team", "--verb=get,list", "--resource=configmaps")
    emulator.kubectl(
        "create", "rolebinding", "bot-reads", "-n", "team", "--role=reader", "--serviceaccount=team:bot"
    )
    token = emulator.kubectl("create", "token", "bot", "-n", "team").stdout.strip()
    bot = Identity(name="system:serviceaccount:team:bot", token=token)
    assert (
        emulator.kubectl(
            "get", "cm", "settings", "-n", "team", "-o", "jsonpath={.data.a}", identity=bot
        ).stdout
        == "b"
    )
    denied = emulator.kubectl("get", "secrets", "-n", "team", identity=bot, check=False)
    assert 'User "system:serviceaccount:team:bot" cannot list resource "secrets"' in denied.stderr


@pytest.mark.parametrize(
    ("args", "answer"),
    [
        (("get", "configmaps", "-n", "team"), "yes"),
        (("delete", "configmaps", "-n", "team"), "no"),
        (("get", "configmaps", "-n", "default"), "no"),
    ],
)
def test_auth_can_i_uses_self_subject_access_review(
    emulator: RunningEmulator, args: tuple[str, ...], answer: str
) -> None:
    reader = emulator.add_identity(Identity(name="reader", token="reader-token"))
    emulator.kubectl("create", "namespace", "team")
    emulator.kubectl("create", "role", "reader", "-n", "team", "--verb=get,list", "--resource=configmaps")
    emulator.kubectl("create", "rolebinding", "reader", "-n", "team", "--role=reader", "--user=reader")
    result = emulator.kubectl("auth", "can-i", *args, identity=reader, check=False)
    assert result.stdout.strip() == answer
    assert emulator.kubectl("auth", "can-i", *args, "--as=reader", check=False).stdout.strip() == answer


def test_namespace_deletion_through_kubectl_waits_until_gone(
    emulator: RunningEmulator, tmp_path: Path
) -> None:
    emulator.kubectl("create", "namespace", "temp")
    emulator.kubectl("apply", "-f", "-", input=WIDGET.replace("namespace: default", "namespace: temp"))
    emulator.kubectl("delete", "namespace", "temp", "--timeout=10s")
    assert emulator.kubectl("get", "namespace", "temp", check=False).returncode == 1
    assert tmp_path.is_dir()
