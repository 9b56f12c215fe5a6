"""Typed access to Jobs (and the Secret a Job reads) in one namespace: create, delete, read the
termination message of a Job's Pods. What a Job is for, and what it is named, is the caller's.

A refused write raises `KubeError`, which names the object and keeps the status, the Status reason
and the invalid fields, never the server's text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ai_models.adapters.kube.objects import Objects
from ai_models.adapters.kube.resources import JOBS, PODS, SECRETS
from ai_models.adapters.kube.secrets import Secrets


class Jobs:
    def __init__(self, api_client: Any, *, namespace: str) -> None:
        self._jobs = Objects(api_client, JOBS)
        self._pods = Objects(api_client, PODS)
        self._secrets = Objects(api_client, SECRETS)
        self._secret_puts = Secrets(api_client)
        self._namespace = namespace

    def create(self, job: Mapping[str, Any], secret: Mapping[str, Any] | None) -> None:
        """Create the Secret (or update it) and the Job; the `KubeError` says which one failed.
        A Job that exists already (an earlier attempt created it) is left as it is."""
        if secret is not None:
            self._secret_puts.put(self._here(secret))
        self._jobs.create(self._here(job), exists_ok=True)

    def delete(self, name: str, *, secret_name: str | None = None) -> None:
        """Delete the Job (its Pods in the background) and the Secret; what is gone already is fine."""
        self._jobs.delete(name, self._namespace, propagation="Background")
        if secret_name is not None:
            self._secrets.delete(secret_name, self._namespace, propagation="Background")

    def termination_message(self, job: Mapping[str, Any], *, container: str) -> str | None:
        """The termination message of `container` in the Job's most recent Pod that terminated."""
        name = job["metadata"]["name"]
        messages: list[tuple[str, str]] = []
        for pod in self._pods.list_all(self._namespace, label_selector=f"job-name={name}"):
            for status in (pod.get("status") or {}).get("containerStatuses") or ():
                terminated = (status.get("state") or {}).get("terminated") or {}
                if status.get("name") == container and terminated.get("message"):
                    # RFC 3339 times in one format: their order as text is their order in time.
                    messages.append((str(terminated.get("finishedAt") or ""), str(terminated["message"])))
        return max(messages)[1] if messages else None

    def _here(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """`body` in this namespace, whatever its metadata says."""
        return {**body, "metadata": {**body["metadata"], "namespace": self._namespace}}
