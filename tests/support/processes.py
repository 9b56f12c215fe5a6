"""The module's processes (`ai-models controller`, `ai-models api`) as real subprocesses in tests.

They run exactly as in a pod: the console entry point, settings from AI_MODELS_* variables, a
kubeconfig for their ServiceAccount. Output goes to a log file the test can read and wait on.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

ENTRY_POINT = Path(sys.executable).parent / "ai-models"


def free_port() -> int:
    """A port nobody listens on right now (for processes that must be told their port)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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

    def start(self) -> ModuleProcess:
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

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def wait_until(self, condition: Callable[[], bool], *, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if not self.running():
                raise AssertionError(
                    f"{' '.join(self.args)} exited while waiting for {what}:\n{self.log()[-4000:]}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}:\n{self.log()[-4000:]}")
            time.sleep(0.1)

    def wait_for_log(self, text: str, *, timeout: float = 30) -> None:
        self.wait_until(lambda: text in self.log(), timeout=timeout, what=f"log line {text!r}")

    def terminate(self, *, timeout: float = 20) -> int:
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
