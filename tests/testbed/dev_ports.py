"""The dev stack's ports: each listener, the `AI_MODELS_DEV_*` variable that sets its port, and the
check that they are free before anything starts, so a taken port ends `make dev` at once with the
variable to change instead of a component that dies after the stack said it was up."""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterable
from dataclasses import dataclass


class DevStackError(RuntimeError):
    """The dev stack cannot start; the message says why and what to change (printed without a
    traceback)."""


@dataclass(frozen=True)
class PortSetting:
    variable: str  # the environment variable (`make dev` reads it)
    option: str  # the same as a command-line option of `python -m testbed.devstack`
    listener: str  # what listens there
    port: int  # 0: any free port

    def advice(self) -> str:
        return f"set {self.variable} to a free port (or 0 for any free port)"


def port_in_use(host: str, port: int) -> OSError | None:
    """Why `port` cannot be bound on `host` (None when it can). SO_REUSEADDR as the components set
    it: a port that only has connections in TIME_WAIT from the last run is free."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind((host, port))
    except OSError as error:
        return error
    finally:
        probe.close()
    return None


def check_ports(settings: Iterable[PortSetting], *, host: str = "127.0.0.1") -> None:
    """Raise `DevStackError` naming every setting whose port is taken (or used twice)."""
    problems: list[str] = []
    seen: dict[int, PortSetting] = {}
    for setting in settings:
        if setting.port == 0:
            continue
        if setting.port in seen:
            other = seen[setting.port]
            problems.append(
                f"port {setting.port} is set for both {other.listener} ({other.variable}) and "
                f"{setting.listener} ({setting.variable}): {setting.advice()}"
            )
            continue
        seen[setting.port] = setting
        error = port_in_use(host, setting.port)
        if error is None:
            continue
        cause = "is in use" if error.errno == errno.EADDRINUSE else f"cannot be bound ({error.strerror})"
        problems.append(
            f"port {setting.port} for {setting.listener} ({setting.variable}, {setting.option}) "
            f"{cause} on {host}: {setting.advice()}"
        )
    if problems:
        raise DevStackError("the dev stack cannot start:\n  " + "\n  ".join(problems))


def component_failed(
    component: str, error: BaseException, *, log_file: str, settings: Iterable[PortSetting]
) -> DevStackError:
    """A component that exited (or never listened) while the stack started. Called once the
    components are stopped: a port of `settings` taken now (by another program, between the check
    and the component's bind) is named with its variable; otherwise the error names the log."""
    settings = list(settings)
    first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
    try:
        check_ports(settings)
    except DevStackError as taken:
        detail = str(taken).split("\n", 1)[1].strip() if "\n" in str(taken) else str(taken)
        return DevStackError(
            f"the dev stack cannot start: {component} did not come up: {detail}; see {log_file}"
        )
    return DevStackError(
        f"the dev stack cannot start: {component} did not come up ({first_line}); see {log_file}"
    )
