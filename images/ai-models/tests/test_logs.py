"""Log lines: JSON objects in the cluster, readable text locally, facts carried as keys."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from ai_models.logs import configure_logging
from ai_models.settings import LogFormat, LogLevel, Settings


@pytest.fixture(autouse=True)
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    libraries = {
        name: logging.getLogger(name).level for name in ("httpx", "httpx2", "httpcore", "leaderelection")
    }
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, library_level in libraries.items():
        logging.getLogger(name).setLevel(library_level)


def test_json_lines_carry_message_level_and_extra_facts() -> None:
    stream = io.StringIO()
    configure_logging(level=LogLevel.INFO, log_format=LogFormat.JSON, stream=stream)
    logging.getLogger("ai_models.test").info("model %s published", "llama", extra={"namespace": "team-a"})
    entry = json.loads(stream.getvalue())
    assert entry["msg"] == "model llama published"
    assert entry["level"] == "info"
    assert entry["logger"] == "ai_models.test"
    assert entry["namespace"] == "team-a"
    assert entry["time"].endswith("+00:00")


def test_json_line_includes_the_exception() -> None:
    stream = io.StringIO()
    configure_logging(level=LogLevel.INFO, log_format=LogFormat.JSON, stream=stream)
    try:
        raise RuntimeError("bucket is gone")
    except RuntimeError:
        logging.getLogger("ai_models.test").exception("publication failed")
    entry = json.loads(stream.getvalue())
    assert "RuntimeError: bucket is gone" in entry["error"]


def test_text_lines_are_readable_and_keep_facts() -> None:
    stream = io.StringIO()
    configure_logging(level=LogLevel.INFO, log_format=LogFormat.TEXT, stream=stream)
    logging.getLogger("ai_models.test").warning("slow start", extra={"attempt": 3})
    line = stream.getvalue().strip()
    assert "WARNING" in line
    assert line.endswith("ai_models.test: slow start attempt=3")


def test_level_filters_lower_records() -> None:
    stream = io.StringIO()
    configure_logging(level=LogLevel.WARN, log_format=LogFormat.TEXT, stream=stream)
    logging.getLogger("ai_models.test").info("hidden")
    assert stream.getvalue() == ""


def test_auto_format_is_json_inside_a_pod_and_text_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert Settings().effective_log_format() is LogFormat.JSON
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    assert Settings().effective_log_format() is LogFormat.TEXT
    monkeypatch.setenv("AI_MODELS_LOG_FORMAT", "json")
    assert Settings().effective_log_format() is LogFormat.JSON


def test_library_records_are_formatted_once_by_the_process_handler() -> None:
    stream = io.StringIO()
    configure_logging(level=LogLevel.INFO, log_format=LogFormat.JSON, stream=stream)
    import ai_models.adapters.hub  # noqa: F401, PLC0415  (importing the adapter adopts the library's logger)

    logging.getLogger("huggingface_hub.utils._http").warning("Retrying in 1.0s [Retry 1/2].")
    logging.getLogger("uvicorn.error").info("Started", extra={"color_message": "\x1b[36mStarted\x1b[0m"})
    lines = stream.getvalue().splitlines()
    assert [json.loads(line)["msg"] for line in lines] == ["Retrying in 1.0s [Retry 1/2].", "Started"]
    assert "color_message" not in lines[1]
    assert logging.getLogger("huggingface_hub").handlers == []


@pytest.mark.parametrize("library", ["httpx2", "httpx", "leaderelection"])
def test_request_lines_of_http_clients_show_only_at_debug(library: str) -> None:
    stream = io.StringIO()
    configure_logging(level=LogLevel.INFO, log_format=LogFormat.JSON, stream=stream)
    logging.getLogger(library).info("HTTP Request: GET https://hub/api/models 200 OK")
    logging.getLogger(library).warning("connection reset")
    assert [json.loads(line)["msg"] for line in stream.getvalue().splitlines()] == ["connection reset"]
    stream = io.StringIO()
    configure_logging(level=LogLevel.DEBUG, log_format=LogFormat.JSON, stream=stream)
    logging.getLogger(library).info("HTTP Request: GET https://hub/api/models 200 OK")
    assert len(stream.getvalue().splitlines()) == 1
