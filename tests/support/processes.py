"""The module's processes (`ai-models controller`, `ai-models api`) as real subprocesses in tests.

They run exactly as in a pod: the console entry point, settings from AI_MODELS_* variables, a
kubeconfig for their ServiceAccount. Output goes to a log file the test can read and wait on.

Their listeners bind port 0 and log the address they got ("serving probes", "serving metrics",
"api starting", each with `address`); `bound_port` reads it from the log of this run, so no test
picks a port, releases it and hands it to a process that may find it taken.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from support.eventually import eventually

ENTRY_POINT = Path(sys.executable).parent / "ai-models"
# The log lines in which the module's listeners report the address they bound.
PROBES_LISTENING = "serving probes"
METRICS_LISTENING = "serving metrics"
API_LISTENING = "api starting"
T = TypeVar("T")


class ProcessExited(RuntimeError):
    """The process ended while a test waited for it: waiting longer cannot help."""


def logged_address(line: str, message: str, *, fact: str = "address") -> str | None:
    """The `fact` (an address) of a log line whose message is `message`, in the JSON or the text
    format."""
    if line.startswith("{"):
        try:
            entry = json.loads(line)
        except ValueError:
            return None
        address = entry.get(fact) if entry.get("msg") == message else None
        return str(address) if address else None
    found = re.search(rf": {re.escape(message)}(?: .*)? {re.escape(fact)}=(\S+)", line)
    return found.group(1) if found else None


class ModuleProcess:
    def __init__(self, *args: str, env: Mapping[str, str], log_path: Path) -> None:
        self.args = args
        self.log_path = log_path
        self._env = {
            **{key: value for key, value in os.environ.items() if not key.startswith("AI_MODELS_")},
            "AI_MODELS_LOG_FORMAT": "json",
            **env,
        }
        self._process: subprocess.Popen[bytes] | None = None
        self._log_start = 0  # where this run's output begins in a log file a restart appends to
        self._ports: dict[str, int] = {}

    def start(self) -> ModuleProcess:
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._ports.clear()
        log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            [str(ENTRY_POINT), *self.args], env=self._env, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        return self

    @property
    def name(self) -> str:
        return "ai-models " + " ".join(self.args)

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    def run_log(self) -> str:
        """The output of this run only (a restarted replica appends to the log file of the last)."""
        if not self.log_path.exists():
            return ""
        with self.log_path.open("rb") as stream:
            stream.seek(self._log_start)
            return stream.read().decode("utf-8", errors="replace")

    def bound_port(self, message: str, *, timeout: float = 60, fact: str = "address") -> int:
        """The port of the listener that logged `message` with its bound address (`fact`) in this run."""
        key = f"{message}/{fact}"
        if key not in self._ports:

            def address() -> str:
                lines = self.run_log().splitlines()
                return next(
                    (found for line in lines if (found := logged_address(line, message, fact=fact))), ""
                )

            what = f"the log line {message!r} with an address"
            bound = self.wait_until(address, timeout=timeout, what=what)
            self._ports[key] = int(bound.rsplit(":", 1)[1])
        return self._ports[key]

    def health_port(self) -> int:
        return self.bound_port(PROBES_LISTENING)

    def metrics_port(self) -> int:
        return self.bound_port(METRICS_LISTENING)

    def api_port(self) -> int:
        return self.bound_port(API_LISTENING)

    def internal_api_port(self) -> int:
        """The api's internal TLS listener (lookup, and serving for the node plugin and materializers)."""
        return self.bound_port(API_LISTENING, fact="internal")

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def wait_until(self, condition: Callable[[], T], *, timeout: float, what: str) -> T:
        """`eventually(condition)`, failing at once when the process exits before it holds."""

        def check() -> T:
            value = condition()
            if not value and not self.running():
                raise ProcessExited(
                    f"{' '.join(self.args)} exited while waiting for {what}:\n{self.log()[-4000:]}"
                )
            return value

        return eventually(check, timeout=timeout, message=lambda: f"{what}:\n{self.log()[-4000:]}")

    def wait_for_log(self, text: str, *, timeout: float = 30) -> None:
        self.wait_until(lambda: text in self.log(), timeout=timeout, what=f"log line {text!r}")

    def terminate(self, *, timeout: float = 60) -> int:
        """SIGTERM and wait; the exit code (a process that had to be killed fails the caller)."""
        assert self._process is not None
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                return self._process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
                raise AssertionError(
                    f"{' '.join(self.args)} ignored SIGTERM:\n{self.log()[-4000:]}"
                ) from None
        return self._process.returncode

    def kill(self) -> None:
        """SIGKILL: a crash, as when a node dies; no cleanup runs."""
        assert self._process is not None
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()

    def __enter__(self) -> ModuleProcess:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
