"""README.md as a newcomer runs it: its shell blocks, top to bottom, in one shell, against `make dev`.

The stack is started by the real entry point (`make dev`), with a local fake Hub as `HF_ENDPOINT`
and every `AI_MODELS_DEV_*_PORT` the stack reads set to 0 (any free port), so the commands must
find the stack through what `.dev/env` exports (`$AI_MODELS_API_URL`), never through a port they
name. The shell runs in a scratch directory that looks like a clone (`docs/` and `.venv/` of the
repository, `.dev/` the stack's directory) with the newcomer's own file `./model.gguf`.

What the test adds to the README is only what a person at a terminal adds: a watch (`kubectl ...
-w`) is stopped after a few seconds, as with Ctrl-C. A block preceded by the comment
`<!-- not run by tests/docs/test_readme_commands.py: <why> -->` is left out (`make dev` itself, a
mode that needs root); every other block must succeed, or the test fails naming its README line.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fakes.hub import FakeHub
from fakes.hub_corpus import FakeModel, make_corpus, repository
from fakes.model_files import GGML_F32, gguf_bytes, safetensors_bytes
from support.eventually import eventually
from support.paths import REPO_ROOT

README = REPO_ROOT / "README.md"
FENCE = re.compile(r"^```shell\n(.*?)^```", re.MULTILINE | re.DOTALL)
SKIP = re.compile(r"<!-- not run by tests/docs/test_readme_commands\.py: (.+?) -->\s*$")
# The sources of the dev stack: the port variables it reads are the ones the test sets to 0.
STACK_SOURCES = [
    *(REPO_ROOT / "tests" / "testbed").glob("*.py"),
    *(REPO_ROOT / "tests" / "support").glob("dev*.py"),
]
PORT_VARIABLE = re.compile(r"\bAI_MODELS_DEV_(?:[A-Z]+_)*PORT\b")
HARD_CODED_PORT = re.compile(r"\b(?:127\.0\.0\.1|localhost|\[::1\]):\d+")
# How long a watch runs before the test stops it, as a user does with Ctrl-C.
WATCH_SECONDS = 5
# What the README's commands take from the machine (besides the venv's kubectl and ai-models).
NEWCOMER_TOOLS = ("bash", "curl", "find", "timeout")
# The model docs/examples/model-hf.yaml names, tiny, so that the walk-through publishes it.
EXAMPLE_REPOSITORY = "Qwen/Qwen3-0.6B"


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence in README.md
    text: str
    skipped: str | None  # why, when the README says the test does not run it


def readme_blocks(text: str) -> list[Block]:
    """The ```shell blocks of a README text, each with its line and the reason it is not run."""
    blocks = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = SKIP.search(before)
        blocks.append(
            Block(
                line=text.count("\n", 0, match.start()) + 1,
                text=match.group(1),
                skipped=skip.group(1) if skip else None,
            )
        )
    return blocks


def shell_script(blocks: list[Block]) -> str:
    """One bash script of the blocks to run: stop at the first failing command, say which block."""
    prelude = f"""set -e -o pipefail
# A watch is stopped after {WATCH_SECONDS} s, as a user stops it with Ctrl-C; anything else it does counts.
kubectl() {{
  case " $* " in
    *" -w "*|*" --watch "*|*" --watch-only "*)
      local status=0
      timeout -s INT {WATCH_SECONDS} "$(type -P kubectl)" "$@" || status=$?
      [ "$status" -eq 124 ] || return "$status"
      echo "(watch stopped after {WATCH_SECONDS} s)"
      return 0;;
  esac
  command kubectl "$@"
}}
"""
    parts = [prelude]
    for block in blocks:
        if block.skipped is None:
            parts.append(f"echo '### README.md line {block.line}' >&2\nset -x\n{block.text}set +x\n")
    parts.append("echo '### README.md: every block ran' >&2\n")
    return "".join(parts)


def run_script(script: str, *, cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str]:
    """Run `script` with bash; its exit code and its output (stdout and stderr, interleaved)."""
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )
    return done.returncode, done.stdout


def failed_block(output: str) -> str:
    """The README line of the block the output stopped in."""
    started = re.findall(r"^### (README\.md line \d+)$", output, re.MULTILINE)
    return started[-1] if started else "before the first block"


def test_readme_blocks_name_no_port() -> None:
    """Ports are the stack's to choose (AI_MODELS_DEV_*): commands use what .dev/env exports."""
    for block in readme_blocks(README.read_text(encoding="utf-8")):
        assert not HARD_CODED_PORT.search(block.text), (
            f"README.md line {block.line}: a command names a port; use $AI_MODELS_API_URL or "
            f"$AI_MODELS_DEV_SERVER from .dev/env:\n{block.text}"
        )


def test_the_runner_stops_at_a_failing_command_and_names_its_block(tmp_path: Path) -> None:
    """The harness can fail: a failing command ends the run, later ones do not run."""
    text = "intro\n\n```shell\ntrue\n```\n\n<!-- not run by tests/docs/test_readme_commands.py: demo -->\n"
    text += "```shell\nexit 3\n```\n\n```shell\necho ran\nfalse\necho never\n```\n"
    blocks = readme_blocks(text)
    assert [(block.line, block.skipped) for block in blocks] == [(3, None), (8, "demo"), (12, None)]
    code, output = run_script(shell_script(blocks), cwd=tmp_path, env=dict(os.environ), timeout=10)
    assert code == 1
    assert "ran" in output.splitlines()
    assert "never" not in output.splitlines()
    assert failed_block(output) == "README.md line 12"


@pytest.fixture
def fake_hub_corpus() -> list[FakeModel]:
    """A small corpus (the catalog walk-through indexes it all) and the README's example model."""
    files = {
        "config.json": b'{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}',
        "model.safetensors": safetensors_bytes({"w": ("F16", (32, 32))}),
    }
    return [*make_corpus(30), repository(EXAMPLE_REPOSITORY, files)]


def stack_port_variables() -> set[str]:
    return {
        name for path in STACK_SOURCES for name in PORT_VARIABLE.findall(path.read_text(encoding="utf-8"))
    }


@pytest.fixture
def make_dev(tmp_path: Path, fake_hub: FakeHub) -> Iterator[Path]:
    """`make dev` running, its directory the scratch clone's `.dev`; yields the scratch clone."""
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in ("docs", ".venv"):
        (clone / name).symlink_to(REPO_ROOT / name)
    out = clone / ".dev"
    env = {
        **os.environ,
        "HF_ENDPOINT": fake_hub.url,
        "AI_MODELS_DEV_DIR": str(out),
        **dict.fromkeys(stack_port_variables(), "0"),
    }
    # As from a terminal: not the settings of a `make test` this test may run under.
    for name in ("KUBECONFIG", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"):
        env.pop(name, None)
    log = tmp_path / "make-dev.log"
    with log.open("w") as output:
        # Its own process group: stopped as a terminal's Ctrl-C stops make and the stack under it.
        process = subprocess.Popen(
            ["make", "--no-print-directory", "dev"],
            cwd=REPO_ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def up() -> bool:
            if process.poll() is not None:  # at once: waiting longer cannot help
                pytest.fail(f"make dev exited {process.returncode}:\n{log.read_text()[-3000:]}")
            return (out / "env").exists()

        eventually(up, timeout=60, interval=0.2, message="make dev to write .dev/env")
        yield clone
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def test_the_readme_commands_run_against_make_dev(make_dev: Path, fake_hub: FakeHub) -> None:
    clone = make_dev
    missing = [tool for tool in NEWCOMER_TOOLS if shutil.which(tool) is None]
    assert not missing, f"the README's commands need {', '.join(missing)} on PATH"
    blocks = readme_blocks(README.read_text(encoding="utf-8"))
    assert [block for block in blocks if block.skipped is None], "README.md has no shell block to run"
    # The newcomer's own file for the upload walk-through.
    (clone / "model.gguf").write_bytes(
        gguf_bytes(
            metadata={"general.architecture": "llama", "llama.context_length": 1024},
            tensors={"w": (GGML_F32, (8, 8))},
        )
    )
    home = clone.parent / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "HF_ENDPOINT": fake_hub.url}
    for name in ("KUBECONFIG", *(name for name in os.environ if name.startswith("AI_MODELS_"))):
        env.pop(name, None)
    code, output = run_script(shell_script(blocks), cwd=clone, env=env, timeout=90)
    print(output)  # what the newcomer saw (pytest shows it with -s or -rP)
    logs = "".join(
        f"\n--- {path.name}\n{path.read_text(errors='replace')[-1500:]}"
        for path in sorted((clone / ".dev" / "logs").glob("*.log"))
    )
    assert code == 0, f"{failed_block(output)} failed (exit {code}):\n{output[-4000:]}\n{logs}"
    assert "### README.md: every block ran" in output


def banner_commands(log: str) -> list[str]:
    """The command lines of the banner `make dev` printed (indented, between its first and last
    line); none before it is printed in full."""
    start, end = log.find("ai-models dev stack is up"), log.find("Stop with Ctrl-C.")
    if start < 0 or end < 0:
        return []
    return [line for line in log[start:end].splitlines() if line.startswith("  ")]


def test_the_banner_commands_name_no_port(make_dev: Path) -> None:
    """What `make dev` prints to try is copied as the README is: its commands use .dev/env's variables."""
    log = make_dev.parent / "make-dev.log"
    commands = eventually(lambda: banner_commands(log.read_text()), timeout=10, message="the banner")
    assert any("$AI_MODELS_API_URL" in line for line in commands)
    assert not [line for line in commands if HARD_CODED_PORT.search(line)]
