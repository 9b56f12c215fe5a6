"""`GET /api/v1/namespaces/{ns}/pods/{name}/log`: a Pod's log, as the kubelet serves it through the
apiserver (`kubectl logs`).

The emulator runs no containers; whoever does (the test bed's Job runner runs Pods as local
processes) tells it where each Pod's output is with a `PodLogSource`. Supported query parameters:
`container` (the Pod must have it), `tailLines`, `limitBytes`, `follow` (the stream ends when the
Pod has ended and its log has been sent, when the Pod is deleted, or when the server stops).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from aiohttp import web

from kubeemu import errors

# (namespace, pod name, container) -> the file with that container's output, None when none exists.
PodLogSource = Callable[[str, str, str], Path | None]
_FOLLOW_POLL_SECONDS = 0.2
_ENDED_PHASES = frozenset({"Succeeded", "Failed"})


def _int(query: Mapping[str, str], key: str) -> int | None:
    raw = query.get(key)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise errors.bad_request(f"{key} must be an integer, got {raw!r}") from None
    if value < 0:
        raise errors.bad_request(f"{key} must not be negative, got {value}")
    return value


def container_of(pod: Mapping[str, Any], requested: str | None) -> str:
    """The container a log request is for: the one named, or the only one (as the apiserver says)."""
    meta = pod.get("metadata") or {}
    names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
    label = f"pod {meta.get('name')}"
    if requested:
        if requested not in names:
            raise errors.bad_request(f"container {requested} is not valid for {label}")
        return requested
    if len(names) == 1:
        return names[0]
    raise errors.bad_request(
        f"a container name must be specified for {label}, choose one of: [{' '.join(names)}]"
    )


def tail(data: bytes, lines: int | None) -> bytes:
    if lines is None:
        return data
    if lines == 0:
        return b""
    kept = data.splitlines(keepends=True)[-lines:]
    return b"".join(kept)


async def serve_log(
    request: web.Request,
    *,
    pod: Mapping[str, Any],
    source: PodLogSource | None,
    read_pod: Callable[[], Mapping[str, Any] | None],
    stopping: asyncio.Event,
) -> web.StreamResponse:
    """The log of `pod` (already authorized and read); `read_pod` reads it again while following."""
    meta = pod.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    container = container_of(pod, request.query.get("container"))
    path = source(namespace, name, container) if source is not None else None
    if path is None or not path.exists():
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        raise errors.bad_request(
            f'container "{container}" in pod "{name}" is waiting to start: no log yet (phase {phase}; '
            "in the emulator only Pods that the test bed runs as processes have a log)"
        )
    lines = _int(request.query, "tailLines")
    limit = _int(request.query, "limitBytes")
    follow = request.query.get("follow", "").lower() in ("true", "1")
    data = tail(path.read_bytes(), lines)
    if limit is not None:
        data = data[:limit]
    if not follow:
        return web.Response(body=data, content_type="text/plain")
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await response.prepare(request)
    await response.write(data)
    sent = path.stat().st_size
    while not stopping.is_set():
        current = read_pod()
        ended = current is None or (current.get("status") or {}).get("phase") in _ENDED_PHASES
        size = path.stat().st_size
        if size > sent:
            with path.open("rb") as stream:
                stream.seek(sent)
                await response.write(stream.read(size - sent))
            sent = size
        elif ended:
            break
        await asyncio.sleep(_FOLLOW_POLL_SECONDS)
    await response.write_eof()
    return response
