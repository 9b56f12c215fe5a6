"""Typed access to Jobs (and the Secret a Job reads) in one namespace: create, delete, read the
termination message of a Job's Pods. What a Job is for, and what it is named, is the caller's."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException


@dataclasses.dataclass(eq=False)  # not frozen: raising sets __traceback__ and __cause__
class ObjectRefused(Exception):
    """The API server answered a write of a publication object with an error.

    Only the status code, the Status reason and the names of the invalid fields are kept: the
    rest of the answer is the server's text, never shown to users."""

    verb: str
    kind: str
    name: str
    namespace: str
    status: int
    reason: str
    fields: tuple[str, ...]

    @classmethod
    def of(cls, verb: str, kind: str, name: str, namespace: str, error: ApiException) -> ObjectRefused:
        reason, fields = "", []
        try:
            document = json.loads(error.body or "")
        except (TypeError, ValueError):
            document = None
        if isinstance(document, dict):
            reason = str(document.get("reason") or "")
            causes = (document.get("details") or {}).get("causes") or []
            fields = sorted(
                {str(item.get("field")) for item in causes if isinstance(item, dict) and item.get("field")}
            )
        return cls(
            verb=verb,
            kind=kind,
            name=name,
            namespace=namespace,
            status=int(error.status or 0),
            reason=re.sub(r"[^A-Za-z]", "", reason)[:40],
            fields=tuple(re.sub(r"[^-A-Za-z0-9_.\[\]/]", "", item)[:80] for item in fields[:5]),
        )

    @property
    def temporary(self) -> bool:
        """Worth retrying soon as it is: the server was unavailable, busy or timed out."""
        return self.status in {0, 429} or self.status >= 500

    def __str__(self) -> str:
        answer = f"HTTP {self.status}" + (f" {self.reason}" if self.reason else "")
        if self.fields:
            answer += " in " + ", ".join(self.fields)
        where = f"{self.kind} {self.namespace}/{self.name}"
        return f"cannot {self.verb} the {where}: the API server answered {answer}"


class Jobs:
    def __init__(self, api_client: Any, *, namespace: str, timeout: tuple[float, float] = (3, 30)) -> None:
        self._batch = k8s.BatchV1Api(api_client)
        self._core = k8s.CoreV1Api(api_client)
        self._namespace = namespace
        self._timeout = timeout

    def create(self, job: Mapping[str, Any], secret: Mapping[str, Any] | None) -> None:
        """Create the Secret (or update it) and the Job; `ObjectRefused` says which one failed.
        A Job that exists already (an earlier attempt created it) is left as it is."""
        if secret is not None:
            name = secret["metadata"]["name"]
            try:
                self._core.create_namespaced_secret(self._namespace, secret, _request_timeout=self._timeout)
            except ApiException as error:
                if error.status != 409:
                    raise ObjectRefused.of("create", "Secret", name, self._namespace, error) from error
                try:
                    self._core.replace_namespaced_secret(
                        name, self._namespace, secret, _request_timeout=self._timeout
                    )
                except ApiException as replace_error:
                    raise ObjectRefused.of(
                        "update", "Secret", name, self._namespace, replace_error
                    ) from error
        try:
            self._batch.create_namespaced_job(self._namespace, job, _request_timeout=self._timeout)
        except ApiException as error:
            if error.status != 409:  # already created by an earlier attempt
                raise ObjectRefused.of(
                    "create", "Job", job["metadata"]["name"], self._namespace, error
                ) from error

    def delete(self, name: str, *, secret_name: str | None = None) -> None:
        """Delete the Job (its Pods in the background) and the Secret; what is gone already is fine."""
        targets = [(self._batch.delete_namespaced_job, name)]
        if secret_name is not None:
            targets.append((self._core.delete_namespaced_secret, secret_name))
        for delete, target in targets:
            try:
                delete(
                    target, self._namespace, propagation_policy="Background", _request_timeout=self._timeout
                )
            except ApiException as error:
                if error.status != 404:
                    raise

    def termination_message(self, job: Mapping[str, Any], *, container: str) -> str | None:
        """The termination message of `container` in the Job's most recent Pod that terminated."""
        name = job["metadata"]["name"]
        pods = self._core.list_namespaced_pod(
            self._namespace, label_selector=f"job-name={name}", _request_timeout=self._timeout
        ).items
        messages: list[tuple[str, str]] = []
        for pod in pods:
            for status in (pod.status.container_statuses or []) if pod.status else []:
                terminated = status.state.terminated if status.state else None
                if status.name == container and terminated is not None and terminated.message:
                    finished = terminated.finished_at.isoformat() if terminated.finished_at else ""
                    messages.append((finished, terminated.message))
        return max(messages)[1] if messages else None
