"""`make dev` with one of its ports taken: it ends at once, naming the `AI_MODELS_DEV_*` variable to
change, without a traceback and without saying it is up."""

from __future__ import annotations

import asyncio
import re
import socket
from pathlib import Path

import pytest

from support.devcomponents import DevPorts
from testbed.dev_ports import DevStackError, PortSetting, check_ports
from testbed.devstack import STATE_FILE, build_stack, parse_args, port_settings, run_stack
from testbed.test_devstack import ANY_PORT, REPO, refused_start

PORT_VARIABLES = tuple(ANY_PORT)


@pytest.mark.parametrize("variable", PORT_VARIABLES)
def test_a_taken_port_ends_the_dev_stack_at_once_naming_its_variable(tmp_path: Path, variable: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ended = refused_start(tmp_path / "dev", timeout=30, **{variable: str(port)})
    assert ended.returncode == 1
    assert f"port {port} for" in ended.stderr
    assert f"set {variable} to a free port" in ended.stderr
    assert "Traceback" not in ended.stderr
    assert "is up" not in ended.stdout
    assert not (tmp_path / "dev" / "env").exists()


def test_one_port_set_for_two_listeners_is_refused_naming_both_variables() -> None:
    with pytest.raises(DevStackError, match=r"AI_MODELS_DEV_API_PORT.*AI_MODELS_DEV_API_METRICS_PORT"):
        check_ports(
            [
                PortSetting("AI_MODELS_DEV_API_PORT", "--api-port", "the api", 18999),
                PortSetting(
                    "AI_MODELS_DEV_API_METRICS_PORT", "--api-metrics-port", "the api's metrics", 18999
                ),
            ]
        )


def test_the_readme_lists_every_variable_the_dev_stack_reads() -> None:
    source = (REPO / "tests" / "testbed" / "devstack.py").read_text()
    read = set(re.findall(r'os\.environ\.get\(\s*"(AI_MODELS_DEV_[A-Z_]+)"', source))
    assert set(PORT_VARIABLES) <= read
    rows = {
        found.group(1)
        for line in (REPO / "README.md").read_text().splitlines()
        if (found := re.match(r"\| `(AI_MODELS_DEV_[A-Z_]+)` \|", line))
    }
    assert read - rows == set(), "README.md's table of AI_MODELS_DEV_* variables misses these"


def test_a_port_taken_after_the_check_ends_the_stack_naming_the_component_and_its_variables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The race the check cannot close: the api's port is taken when the api binds it. The api
    exits, and the stack ends naming the api, its log and the variable of the taken port, before any
    banner."""
    out = tmp_path / "dev"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = parse_args(["--out-dir", str(out), *(f"{s.option}=0" for s in port_settings(parse_args([])))])
        args.api_port = port
        stack = build_stack(out_dir=out, state_file=out / STATE_FILE)
        ports = DevPorts(controller_health=0, controller_metrics=0, api=port, api_metrics=0)
        with pytest.raises(DevStackError) as failed:
            asyncio.run(
                run_stack(
                    stack,
                    host="127.0.0.1",
                    port=0,
                    ports=ports,
                    stop=asyncio.Event(),
                    settings=port_settings(args),
                    state_file=out / STATE_FILE,
                )
            )
    message = str(failed.value)
    assert "ai-models api" in message
    assert str(out / "logs" / "api.log") in message
    assert f"port {port} for the api (AI_MODELS_DEV_API_PORT, --api-port) is in use" in message
    assert "is up" not in capsys.readouterr().out
    assert not (out / "env").exists()
