"""The one error every Kubernetes adapter raises: the API's answer, or the lack of one.

`KubeError` keeps the status code (0 when no answer came: refused, TLS, timeout), the Status
reason and the names of the invalid fields, each reduced to a safe alphabet, and a bounded copy of
the Status message for logs and for the api's own problem answers. `str()` never carries the
server's text: it is what a controller may write into an object's status.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Final

# The API's answer to these means it cannot serve now, not that it refused the request.
UNAVAILABLE_STATUSES: Final = frozenset({0, 429, 503, 504})
MESSAGE_LIMIT: Final = 300


@dataclasses.dataclass(eq=False)  # not frozen: raising sets __traceback__ and __cause__
class KubeError(Exception):
    verb: str
    kind: str
    name: str
    namespace: str
    status: int
    reason: str = ""
    fields: tuple[str, ...] = ()
    message: str = ""  # the Status message (or the transport failure's class); logs and api problems only

    @classmethod
    def answered(
        cls, verb: str, kind: str, name: str, namespace: str, *, status: int, body: bytes
    ) -> KubeError:
        """The error for an answer with `status` whose body is `body` (a Status, or anything)."""
        document: Any = None
        try:
            document = json.loads(body[:65536] or b"null")
        except (TypeError, ValueError):
            document = None
        reason, message, fields = "", "", []
        if isinstance(document, dict):
            reason = str(document.get("reason") or "")
            message = str(document.get("message") or "")
            causes = (document.get("details") or {}).get("causes") or []
            fields = sorted(
                {str(item.get("field")) for item in causes if isinstance(item, dict) and item.get("field")}
            )
        return cls(
            verb=verb,
            kind=kind,
            name=name,
            namespace=namespace,
            status=int(status or 0),
            reason=re.sub(r"[^A-Za-z]", "", reason)[:40],
            fields=tuple(re.sub(r"[^-A-Za-z0-9_.\[\]/]", "", item)[:80] for item in fields[:5]),
            message=re.sub(r"[^\x20-\x7e]", "?", message)[:MESSAGE_LIMIT],
        )

    @classmethod
    def unanswered(cls, verb: str, kind: str, name: str, namespace: str, cause: BaseException) -> KubeError:
        """The error for a request that got no answer (connection refused, TLS failure, timeout)."""
        return cls(
            verb=verb, kind=kind, name=name, namespace=namespace, status=0, message=type(cause).__name__
        )

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        """409: the object exists already, or a precondition (uid, resourceVersion) did not hold."""
        return self.status == 409

    @property
    def expired(self) -> bool:
        """410: the resourceVersion or continue token is too old; list again from the start."""
        return self.status == 410

    @property
    def forbidden(self) -> bool:
        return self.status in (401, 403)

    @property
    def unavailable(self) -> bool:
        """No answer, or the API cannot serve now (throttled, unavailable, timed out)."""
        return self.status in UNAVAILABLE_STATUSES

    @property
    def temporary(self) -> bool:
        """Worth retrying soon as it is: the server was unreachable, busy or failing."""
        return self.status in {0, 429} or self.status >= 500

    @property
    def answer(self) -> str:
        """What came back, in safe words: `HTTP 422 Invalid in spec.x`, or `no answer (ReadTimeoutError)`."""
        if self.status == 0:
            return f"no answer ({self.message})" if self.message else "no answer"
        answer = f"HTTP {self.status}" + (f" {self.reason}" if self.reason else "")
        if self.fields:
            answer += " in " + ", ".join(self.fields)
        return answer

    def __str__(self) -> str:
        if not self.name:
            where = f"{self.kind} objects" + (f" in namespace {self.namespace}" if self.namespace else "")
        else:
            where = (
                "the " + self.kind + " " + (f"{self.namespace}/{self.name}" if self.namespace else self.name)
            )
        if self.status == 0:
            return f"cannot {self.verb} {where}: the API server did not answer" + (
                f" ({self.message})" if self.message else ""
            )
        return f"cannot {self.verb} {where}: the API server answered {self.answer}"
