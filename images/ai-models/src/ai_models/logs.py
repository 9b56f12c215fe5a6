"""Structured logging: one JSON object per line in the cluster, readable lines locally.

Call sites use the standard `logging` module and pass facts as `extra={...}`; the JSON formatter
emits them as top-level keys so log collectors can filter on the object a line is about.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import Any, TextIO

from ai_models.settings import LogFormat, LogLevel

_LEVELS = {
    LogLevel.DEBUG: logging.DEBUG,
    LogLevel.INFO: logging.INFO,
    LogLevel.WARN: logging.WARNING,
    LogLevel.ERROR: logging.ERROR,
}

# Attributes every LogRecord has; anything else on a record came from `extra=` and is a fact.
# uvicorn's `color_message` repeats the message with terminal colours.
_STANDARD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "color_message",
}


def _facts(record: logging.LogRecord) -> dict[str, Any]:
    return {key: value for key, value in vars(record).items() if key not in _STANDARD_ATTRS}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(_facts(record))
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s", datefmt="%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        facts = _facts(record)
        if facts:
            line += " " + " ".join(f"{key}={value}" for key, value in sorted(facts.items()))
        return line


# HTTP client libraries log every request at INFO (a catalog pass makes hundreds) without saying
# what the request was for; the module's own lines name the object. Their lines show at Debug.
REQUEST_LOGGERS = ("httpx", "httpx2", "httpcore", "leaderelection")


def configure_logging(*, level: LogLevel, log_format: LogFormat, stream: TextIO | None = None) -> None:
    """Route all logging to one handler on `stream` (stderr by default) in the chosen format."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format is LogFormat.JSON else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(_LEVELS[level])
    for name in REQUEST_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if level is LogLevel.DEBUG else logging.WARNING)
