"""A stand-in for `ai-models publish` in the job-runner tests (the runner maps the container command
`fake-publisher` to this file). Each sub-command exercises one thing a Pod's process can do: exit
codes, the termination message file, logs, being killed, the environment and the API as its
ServiceAccount."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from ai_models.names import PublishVariable

TERMINATION_MESSAGE_ENV = PublishVariable.TERMINATION_MESSAGE_PATH.value


def write_message(text: str) -> None:
    Path(os.environ[TERMINATION_MESSAGE_ENV]).write_text(text, encoding="utf-8")


def exit_with(args: argparse.Namespace) -> int:
    """Print `--lines` numbered lines (stdout and stderr alternate), write `--message`, exit `--code`."""
    for number in range(1, args.lines + 1):
        print(
            f"line {number:04d} {'x' * args.width}", file=sys.stdout if number % 2 else sys.stderr, flush=True
        )
    if args.message is not None:
        write_message(args.message)
    return int(args.code)


def sleep(args: argparse.Namespace) -> int:
    """The first run leaves a marker and sleeps until killed; a later run (a retry) succeeds."""
    marker = Path(args.marker)
    if marker.exists():
        print("second run", flush=True)
        return 0
    marker.write_text(str(os.getpid()))
    print("sleeping", flush=True)
    while True:
        time.sleep(60)


def wait_for(args: argparse.Namespace) -> int:
    """Wait (polling a file: no API involved) until `--release` exists, then succeed."""
    print("waiting", flush=True)
    while not Path(args.release).exists():
        time.sleep(0.05)
    print("released", flush=True)
    return 0


def show_env(_args: argparse.Namespace) -> int:
    print(json.dumps(dict(os.environ), sort_keys=True), flush=True)
    return 0


def write(args: argparse.Namespace) -> int:
    """Write `--text` into `--file` (creating its directory), then print the environment as `env`."""
    target = Path(args.file)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(args.text, encoding="utf-8")
    return show_env(args)


def call_api(args: argparse.Namespace) -> int:
    """Who the API says this process is, and what RBAC lets it do (results as one JSON line)."""
    from kubernetes import client, config  # noqa: PLC0415  (only this sub-command needs the client)
    from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

    config.load_kube_config()  # KUBECONFIG: the runner's stand-in for the projected token
    api: Any = client.ApiClient()
    result: dict[str, Any] = {}
    review = client.AuthenticationV1Api(api).create_self_subject_review({})
    result["user"] = review.status.user_info.username
    core = client.CoreV1Api(api)
    result["configmap"] = core.read_namespaced_config_map(args.configmap, args.namespace).data
    try:
        core.list_namespaced_secret(args.namespace)
        result["secrets"] = "listed"
    except ApiException as error:
        result["secrets"] = error.status
    print(json.dumps(result, sort_keys=True), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fake-publisher")
    commands = parser.add_subparsers(dest="command", required=True)
    exiting = commands.add_parser("exit")
    exiting.add_argument("--code", type=int, default=0)
    exiting.add_argument("--message")
    exiting.add_argument("--lines", type=int, default=0)
    exiting.add_argument("--width", type=int, default=0)
    exiting.set_defaults(handler=exit_with)
    sleeping = commands.add_parser("sleep")
    sleeping.add_argument("--marker", required=True)
    sleeping.set_defaults(handler=sleep)
    waiting = commands.add_parser("wait-for")
    waiting.add_argument("--release", required=True)
    waiting.set_defaults(handler=wait_for)
    commands.add_parser("env").set_defaults(handler=show_env)
    writing = commands.add_parser("write")
    writing.add_argument("--file", required=True)
    writing.add_argument("--text", required=True)
    writing.set_defaults(handler=write)
    api = commands.add_parser("api")
    api.add_argument("--namespace", required=True)
    api.add_argument("--configmap", required=True)
    api.set_defaults(handler=call_api)
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
