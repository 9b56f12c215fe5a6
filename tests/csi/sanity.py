"""Runs the CSI conformance suite (kubernetes-csi's `csi-sanity`) against `ai-models node-cache`.

    make csi-sanity CSI_SANITY=/path/to/csi-sanity      (PYTHONPATH=tests .venv/bin/python -m csi.sanity PATH)

The plugin is the real process on a unix socket, with a kubelet directory, a cache root and a
kubeconfig of its own under a temporary directory; the kubeconfig points at no server, since no
spec the suite can run on a node-only plugin gets past the request checks to authorization. Two
groups of specs are skipped, each for a reason of the suite's, not the plugin's: the Controller
Server specs (the suite runs them whether or not the plugin offers a controller service, and this
one offers none), and "should remove target path", which creates its volume with the controller's
CreateVolume first. The project's tests do not run this: the binary is not part of the repository.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from support.processes import ModuleProcess

SKIPPED = ("Controller Server", "should remove target path")
KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: none, user: {token: none}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
"""


def run(csi_sanity: Path) -> int:
    with tempfile.TemporaryDirectory(prefix="csi-sanity-", dir="/tmp") as scratch:
        work = Path(scratch)
        kubelet = work / "kubelet"
        (kubelet / "pods").mkdir(parents=True)
        (work / "kubeconfig").write_text(KUBECONFIG)
        (work / "token").write_text("unused")
        socket = work / "csi.sock"
        plugin = ModuleProcess(
            "node-cache",
            f"--csi-endpoint=unix://{socket}",
            "--node-name=sanity",
            f"--cache-root={work / 'cache'}",
            env={
                "KUBECONFIG": str(work / "kubeconfig"),
                "AI_MODELS_NODE_CACHE_SIZE": "1Gi",
                "AI_MODELS_NODE_CACHE_API_URL": "https://127.0.0.1:1",
                "AI_MODELS_NODE_CACHE_TOKEN_FILE": str(work / "token"),
                "AI_MODELS_NODE_CACHE_KUBELET_DIR": str(kubelet),
                "AI_MODELS_NODE_CACHE_HEALTH_ADDRESS": "127.0.0.1",
                "AI_MODELS_NODE_CACHE_HEALTH_PORT": "0",
            },
            log_path=work / "plugin.log",
        )
        with plugin:
            plugin.wait_until(socket.exists, timeout=60, what="the plugin's socket")
            command = [
                str(csi_sanity),
                f"--csi.endpoint=unix://{socket}",
                f"--csi.mountdir={kubelet / 'pods' / 'sanity-target'}",
                f"--csi.stagingdir={kubelet / 'pods' / 'sanity-staging'}",
                "--ginkgo.no-color",
                *(f"--ginkgo.skip={spec}" for spec in SKIPPED),
            ]
            result = subprocess.run(command, check=False, timeout=600)
            stopped = plugin.terminate()
        if stopped != 0:
            print(f"the plugin exited {stopped} on SIGTERM:\n{plugin.log()[-4000:]}", file=sys.stderr)
            return stopped
        return result.returncode


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} PATH-OF-CSI-SANITY")
    sys.exit(run(Path(sys.argv[1])))
