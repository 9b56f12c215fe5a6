"""`make dev`: the local stack as a real process, used through kubectl with its three identities."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ai_models import names
from fakes.hub import FakeHub
from fakes.hub_corpus import repository
from fakes.model_files import GGML_F32, gguf_bytes, safetensors_bytes
from kubeemu.pytest_fixtures import KUBECTL
from support.eventually import eventually
from testbed.csi_kubelet import is_mount_point, mount_points, unmount_under
from testbed.devstack import DEV_CACHE_NODES, parse_args, port_settings, report_jsonpath
from testbed.module import module_image

REPO = Path(__file__).resolve().parents[2]
# Every listener of the stack on a free port (a new listener is covered once port_settings lists it).
ANY_PORT = {setting.variable: "0" for setting in port_settings(parse_args([]))}


def devstack_env(out: Path, **extra_env: str) -> dict[str, str]:
    """The environment of a dev stack writing into `out`: any free ports, no outer kubeconfig."""
    tests = str(REPO / "tests")
    env = {**os.environ, **ANY_PORT, "AI_MODELS_DEV_DIR": str(out), "PYTHONPATH": tests, **extra_env}
    env.pop("KUBECONFIG", None)
    return env


def refused_start(out: Path, *, timeout: float, **extra_env: str) -> subprocess.CompletedProcess[str]:
    """A dev stack start that must end at once (a bad setting): its exit status and output."""
    return subprocess.run(
        [sys.executable, "-m", "testbed.devstack"],
        cwd=REPO,
        env=devstack_env(out, **extra_env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def devstack(tmp_path: Path, fake_hub: FakeHub) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    yield from run_devstack(tmp_path, fake_hub)


@pytest.fixture
def node_cache_devstack(tmp_path: Path, fake_hub: FakeHub) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """`make dev` in NodeCache mode (two nodes, a plugin each, the CSI kubelet)."""
    try:
        yield from run_devstack(tmp_path, fake_hub, AI_MODELS_DEV_DELIVERY_MODE="NodeCache")
    finally:
        unmount_under(tmp_path)  # a stack that was killed leaves its pods' mounts


def run_devstack(
    tmp_path: Path, fake_hub: FakeHub, **extra_env: str
) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    out = tmp_path / "dev"
    env = devstack_env(
        out, **{"HF_ENDPOINT": fake_hub.url, "AI_MODELS_DEV_DELIVERY_MODE": "SharedPVC", **extra_env}
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "testbed.devstack"],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:

        def up() -> bool:
            assert process.poll() is None, process.communicate()[1]
            return (out / "env").exists()

        eventually(up, timeout=60, message="the dev stack to write its env file")
        yield process, out
    finally:
        if process.poll() is None:
            # SIGTERM first: the stack stops its components; a SIGKILL would leave them running
            # (holding their ports) with no parent.
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        process.communicate(timeout=10)


def env_of(out: Path) -> dict[str, str]:
    """The variables the stack's env file exports."""
    lines = (out / "env").read_text().splitlines()
    return dict(line.removeprefix("export ").split("=", 1) for line in lines if line.startswith("export"))


def search(out: Path, token: str) -> dict[str, Any]:
    """One search through the dev api (at the URL its env file exports)."""
    request = urllib.request.Request(
        f"{env_of(out)['AI_MODELS_API_URL']}/api/catalog-import/v1/models?pipelineTag=text-generation&pageSize=5",
        headers={"Authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        page: dict[str, Any] = json.loads(response.read())
    return page


def run_kubectl(
    out: Path, *args: str, context: str | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    command = [
        str(KUBECTL),
        "--kubeconfig",
        str(out / "kubeconfig"),
        "--cache-dir",
        str(out / "cache"),
        *args,
    ]
    if context:
        command += ["--context", context]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=30, check=False)


def test_dev_stack_serves_the_module_api_to_its_three_identities(
    devstack: tuple[subprocess.Popen[str], Path],
) -> None:
    process, out = devstack
    env_lines = (out / "env").read_text().splitlines()
    exported = dict(
        line.removeprefix("export ").split("=", 1) for line in env_lines if line.startswith("export")
    )
    assert {
        "KUBECONFIG",
        "AI_MODELS_DEV_SERVER",
        "AI_MODELS_TOKEN_CLUSTER_ADMIN",
        "AI_MODELS_TOKEN_USER",
        "AI_MODELS_TOKEN_NAMESPACE_USER",
    } <= set(exported)
    assert exported["PATH"] == f"{KUBECTL.parent}:$PATH"
    kubeconfig = yaml.safe_load((out / "kubeconfig").read_text())
    assert kubeconfig["current-context"] == "cluster-admin"
    assert [c["name"] for c in kubeconfig["contexts"]] == ["cluster-admin", "user", "namespace-user"]

    example = (REPO / "docs" / "examples" / "model-hf.yaml").read_text()
    name = yaml.safe_load(example)["metadata"]["name"]
    applied = run_kubectl(out, "apply", "-f", "-", stdin=example)
    assert applied.returncode == 0, applied.stderr
    assert run_kubectl(out, "get", "models", "-n", "default", "-o", "name").stdout.split() == [
        f"model.ai.deckhouse.io/{name}"
    ]
    invalid = yaml.safe_load(example)
    invalid["metadata"]["name"] = "invalid"
    invalid["spec"]["source"]["upload"] = {}
    rejected = run_kubectl(out, "apply", "-f", "-", stdin=yaml.safe_dump(invalid))
    assert rejected.returncode == 1
    # The exact line docs/USER_GUIDE.md shows a user.
    assert (
        'The Model "invalid" is invalid: spec.source: Invalid value: "object": '
        "exactly one of url, upload or catalog must be set" in rejected.stderr
    )
    changed = run_kubectl(
        out,
        "patch",
        "model",
        name,
        "-n",
        "default",
        "--type",
        "merge",
        "-p",
        '{"spec": {"source": {"url": "https://huggingface.co/org/other"}}}',
    )
    assert changed.returncode == 1
    assert 'spec.source: Invalid value: "object": spec.source is immutable' in changed.stderr

    def can_i(context: str, *args: str) -> str:
        return run_kubectl(out, "auth", "can-i", *args, context=context).stdout.strip()

    assert can_i("cluster-admin", "create", "clustermodels") == "yes"
    assert can_i("cluster-admin", "create", "namespaces") == "yes"
    assert can_i("user", "list", "clustermodels") == "yes"
    assert can_i("user", "create", "models", "-n", "default") == "no"
    assert can_i("namespace-user", "list", "models", "-n", "default") == "yes"
    assert can_i("namespace-user", "list", "models", "-n", "kube-system") == "no"
    assert can_i("namespace-user", "list", "clustermodels", "--all-namespaces") == "no"
    forbidden = run_kubectl(out, "get", "clustermodels", context="namespace-user")
    assert 'User "dev-namespace-user" cannot list resource "clustermodels"' in forbidden.stderr

    # The controller runs as its ServiceAccount: the documented source is indexed from HF_ENDPOINT
    # (the fake Hub) and the api serves it to the cluster-wide user, not the namespace-limited one.
    source = REPO / "docs" / "examples" / "modelcatalogsource-hf.yaml"
    assert run_kubectl(out, "apply", "-f", str(source)).returncode == 0

    def ready_reason() -> str:
        jsonpath = "jsonpath={.status.conditions[?(@.type=='Ready')].reason}"
        return run_kubectl(out, "get", "modelcatalogsource", "huggingface", "-o", jsonpath).stdout

    eventually(
        lambda: ready_reason() == "CatalogServed",
        timeout=60,
        interval=0.2,
        message=lambda: f"the source served:\n{(out / 'logs' / 'controller.log').read_text()[-3000:]}",
    )
    # The api's index catches up with the served generation on its own schedule.
    assert eventually(
        lambda: search(out, exported["AI_MODELS_TOKEN_USER"])["items"],
        timeout=30,
        interval=0.2,
        message="the served entries in a search",
    )
    with pytest.raises(urllib.error.HTTPError) as forbidden_search:
        search(out, exported["AI_MODELS_TOKEN_NAMESPACE_USER"])
    assert forbidden_search.value.code == 403

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    assert (out / "kubeconfig").exists()
    assert "stopped with exit code 0" in process.communicate(timeout=10)[1]


def test_dev_stack_runs_module_image_jobs_and_exports_the_api_url(
    devstack: tuple[subprocess.Popen[str], Path],
) -> None:
    process, out = devstack
    exported = dict(
        line.removeprefix("export ").split("=", 1)
        for line in (out / "env").read_text().splitlines()
        if line.startswith("export")
    )
    # The port the api bound (the stack asked for any free one): the api answers there.
    api_url = exported["AI_MODELS_API_URL"]
    assert re.fullmatch(r"http://127\.0\.0\.1:[1-9][0-9]*", api_url)
    with urllib.request.urlopen(f"{api_url}/healthz", timeout=10) as response:
        assert response.status == 200

    # A Job with the module image runs as a local process (the stack's JobRunner), as the
    # controller's publish Jobs will; its ServiceAccount is one the chart renders.
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "version", "namespace": "d8-ai-models"},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "serviceAccountName": "controller",
                    "restartPolicy": "Never",
                    "containers": [{"name": "publish", "image": module_image(), "args": ["version"]}],
                }
            },
        },
    }
    assert run_kubectl(out, "apply", "-f", "-", stdin=json.dumps(job)).returncode == 0
    waited = run_kubectl(
        out, "wait", "-n", "d8-ai-models", "--for=condition=Complete", "job/version", "--timeout=20s"
    )
    assert waited.returncode == 0, waited.stderr
    [log] = (out / "jobs" / "d8-ai-models").glob("version-*/log")
    assert log.read_text().strip() == "ai-models 0.1.0"

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    assert "job runner stopped" in process.communicate(timeout=10)[1]


def test_dev_stack_binds_claims_of_its_default_rwx_class_and_rolls_out_deployments(
    devstack: tuple[subprocess.Popen[str], Path],
) -> None:
    process, out = devstack
    manifests = [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "shared", "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "web",
                                "image": "nginx:1.27",
                                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                            }
                        ],
                        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "shared"}}],
                    },
                },
            },
        },
    ]
    for manifest in manifests:
        applied = run_kubectl(out, "apply", "-f", "-", stdin=json.dumps(manifest))
        assert applied.returncode == 0, applied.stderr
    bound = run_kubectl(
        out, "wait", "-n", "default", "--for=jsonpath={.status.phase}=Bound", "pvc/shared", "--timeout=20s"
    )
    assert bound.returncode == 0, bound.stderr
    claim = json.loads(run_kubectl(out, "get", "pvc", "shared", "-n", "default", "-o", "json").stdout)
    assert claim["spec"]["storageClassName"] == "testbed-rwx"
    volume = json.loads(run_kubectl(out, "get", "pv", claim["spec"]["volumeName"], "-o", "json").stdout)
    assert Path(volume["spec"]["hostPath"]["path"]).parent == (out / "volumes").resolve()
    # kubectl's own rollout check reads the Deployment status the stack's controllers write.
    rolled = run_kubectl(out, "rollout", "status", "-n", "default", "deployment/web", "--timeout=20s")
    assert rolled.returncode == 0, rolled.stderr
    assert "successfully rolled out" in rolled.stdout

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    assert "cluster simulation stopped" in process.communicate(timeout=10)[1]


def test_dev_stack_publishes_from_the_hub_endpoint_and_from_an_upload(
    devstack: tuple[subprocess.Popen[str], Path], fake_hub: FakeHub
) -> None:
    process, out = devstack
    weights = safetensors_bytes({"w": ("F16", (32, 32))})
    fake_hub.add(
        repository(
            "acme/tiny",
            {
                "config.json": b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}',
                "model.safetensors": weights,
            },
        )
    )
    models = """
apiVersion: ai.deckhouse.io/v1alpha1
kind: Model
metadata: {name: tiny, namespace: default}
spec: {source: {url: "https://huggingface.co/acme/tiny"}}
---
apiVersion: ai.deckhouse.io/v1alpha1
kind: Model
metadata: {name: mine, namespace: default}
spec: {source: {upload: {}}}
"""
    assert run_kubectl(out, "apply", "-f", "-", stdin=models).returncode == 0
    waited = run_kubectl(out, "wait", "-n", "default", "--for=condition=Ready", "model/tiny", "--timeout=60s")
    assert waited.returncode == 0, waited.stderr + (out / "logs" / "controller.log").read_text()[-3000:]

    waited = run_kubectl(
        out,
        "wait",
        "-n",
        "default",
        "--for=jsonpath={.status.phase}=WaitForUpload",
        "model/mine",
        "--timeout=30s",
    )
    assert waited.returncode == 0, waited.stderr
    url = run_kubectl(
        out, "get", "model", "mine", "-n", "default", "-o", "jsonpath={.status.upload.inCluster}"
    ).stdout
    assert url.startswith(f"{env_of(out)['AI_MODELS_API_URL']}/api/upload/v1/")
    gguf = gguf_bytes(
        metadata={"general.architecture": "llama", "llama.context_length": 1024},
        tensors={"w": (GGML_F32, (8, 8))},  # a GGUF without tensors is no model
    )
    exported = dict(
        line.removeprefix("export ").split("=", 1)
        for line in (out / "env").read_text().splitlines()
        if line.startswith("export")
    )

    def put(token: str) -> int:
        request = urllib.request.Request(
            url + "?filename=mine.gguf",
            data=gguf,
            method="PUT",
            headers={"Authorization": f"Bearer {token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return int(response.status)
        except urllib.error.HTTPError as error:
            return int(error.code)

    # As the banner says: a User reads the URL and is refused; the admin (an editor) uploads.
    assert put(exported["AI_MODELS_TOKEN_USER"]) == 403
    assert put(exported["AI_MODELS_TOKEN_CLUSTER_ADMIN"]) == 201
    waited = run_kubectl(out, "wait", "-n", "default", "--for=condition=Ready", "model/mine", "--timeout=60s")
    assert waited.returncode == 0, waited.stderr

    stored = sorted(
        path.name
        for path in (out / "store" / "artifacts" / "namespaced" / "default").rglob("*")
        if path.is_file()
    )
    assert stored == ["config.json", "manifest.json", "manifest.json", "mine.gguf", "model.safetensors"]
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0


def test_the_documented_deployment_gets_the_documented_model_in_the_dev_stack(
    devstack: tuple[subprocess.Popen[str], Path], fake_hub: FakeHub
) -> None:
    """The banner's delivery walk-through: docs/examples/deployment-with-model.yaml applied before
    the Model of docs/examples/model-hf.yaml is Ready ends Delivered, its pod ungated, and the
    model's files, every sha256 right, under the stack's volumes directory."""
    _, out = devstack
    files = {
        "config.json": b'{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}',
        "model.safetensors": safetensors_bytes({"w": ("F16", (32, 32))}),
    }
    fake_hub.add(repository("Qwen/Qwen3-0.6B", files))
    workload = REPO / "docs" / "examples" / "deployment-with-model.yaml"
    applied = run_kubectl(out, "apply", "-f", str(workload))
    assert applied.returncode == 0, applied.stderr
    assert "Warning: ai-models: the pods wait" in applied.stderr
    assert run_kubectl(out, "apply", "-f", str(REPO / "docs" / "examples" / "model-hf.yaml")).returncode == 0

    reason = "{.metadata.annotations.ai\\.deckhouse\\.io/model-delivery-reason}"
    waited = run_kubectl(
        out,
        "wait",
        "-n",
        "default",
        f"--for=jsonpath={reason}=Delivered",
        "deployment/list-model-files",
        "--timeout=90s",
    )
    assert waited.returncode == 0, waited.stderr + (out / "logs" / "controller.log").read_text()[-3000:]
    rolled = run_kubectl(
        out, "rollout", "status", "-n", "default", "deployment/list-model-files", "--timeout=30s"
    )
    assert rolled.returncode == 0, rolled.stderr
    trees = [path for path in (out / "volumes").glob("pvc-*/objects/sha256-*") if path.is_dir()]
    assert len(trees) == 1, trees
    assert {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in trees[0].iterdir()} == {
        name: hashlib.sha256(data).hexdigest() for name, data in files.items()
    }


def test_dev_stack_in_node_cache_mode_mounts_the_documented_model_read_only_into_the_pod(
    node_cache_devstack: tuple[subprocess.Popen[str], Path], fake_hub: FakeHub
) -> None:
    """`AI_MODELS_DEV_DELIVERY_MODE=NodeCache make dev`: two nodes whose plugins label them ready,
    the banner's walk-through ends with the model's files, every sha256 right, at the pod's volume
    target on its node, a read-only bind mount of the node's cache; the node reports the digest; on
    SIGTERM the stack exits 0 and leaves nothing mounted."""
    process, out = node_cache_devstack
    files = {
        "config.json": b'{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}',
        "model.safetensors": safetensors_bytes({"w": ("F16", (32, 32))}),
    }
    fake_hub.add(repository("Qwen/Qwen3-0.6B", files))
    ready = f"{{.items[*].metadata.labels.{names.NODE_CACHE_READY_LABEL.replace('.', chr(92) + '.')}}}"

    def nodes_ready() -> bool:
        return run_kubectl(out, "get", "nodes", "-o", f"jsonpath={ready}").stdout.split() == ["true", "true"]

    eventually(nodes_ready, timeout=60, message="both nodes labelled ready by their plugins")
    listed = json.loads(run_kubectl(out, "get", "nodes", "-o", "json").stdout)
    assert sorted(node["metadata"]["name"] for node in listed["items"]) == list(DEV_CACHE_NODES)
    for path in ("deployment-with-model.yaml", "model-hf.yaml"):
        applied = run_kubectl(out, "apply", "-f", str(REPO / "docs" / "examples" / path))
        assert applied.returncode == 0, applied.stderr

    reason = "{.metadata.annotations.ai\\.deckhouse\\.io/model-delivery-reason}"
    waited = run_kubectl(
        out,
        "wait",
        "-n",
        "default",
        f"--for=jsonpath={reason}=Delivered",
        "deployment/list-model-files",
        "--timeout=90s",
    )
    assert waited.returncode == 0, waited.stderr + (out / "logs" / "controller.log").read_text()[-3000:]
    rolled = run_kubectl(
        out, "rollout", "status", "-n", "default", "deployment/list-model-files", "--timeout=60s"
    )
    assert rolled.returncode == 0, rolled.stderr + "".join(
        path.read_text()[-2000:] for path in (out / "logs").glob("node-cache-*.log")
    )
    pods = json.loads(
        run_kubectl(out, "get", "pods", "-n", "default", "-l", "app=list-model-files", "-o", "json").stdout
    )
    [pod] = [p for p in pods["items"] if p["status"].get("phase") == "Running"]
    node, uid = pod["spec"]["nodeName"], pod["metadata"]["uid"]
    [volume] = [
        v["name"]
        for v in pod["spec"]["volumes"]
        if (v.get("csi") or {}).get("driver") == names.NODE_CACHE_DRIVER
    ]
    target = (
        out / "nodes" / node / "kubelet" / "pods" / uid / "volumes" / "kubernetes.io~csi" / volume / "mount"
    )
    assert is_mount_point(target)
    assert {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in target.iterdir()} == {
        name: hashlib.sha256(data).hexdigest() for name, data in files.items()
    }
    with pytest.raises(OSError, match="Read-only file system"):
        (target / "written-by-the-pod").write_bytes(b"x")
    digest = json.loads(run_kubectl(out, "get", "model", "qwen3-0-6b", "-n", "default", "-o", "json").stdout)[
        "status"
    ]["artifact"]["digest"]

    def reported() -> bool:
        shown = run_kubectl(out, "get", "node", node, "-o", f"jsonpath={report_jsonpath()}").stdout
        return digest in json.loads(shown or "{}").get("readyDigests", [])

    eventually(reported, timeout=30, message=f"{digest} in the cache report of {node} (the banner's command)")

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    banner_text = process.communicate(timeout=10)[0]
    assert "Delivery mode NodeCache" in banner_text
    assert report_jsonpath() in banner_text
    assert not [p for p in mount_points() if p.is_relative_to(out.resolve())]
