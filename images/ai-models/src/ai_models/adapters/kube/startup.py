"""A process's first contact with the API server: its configuration made the client library's
default, one probe of the server's version, and the client every later call goes through.

The probe does not retry (urllib3's retries are off for it): its caller waits between attempts
with its own backoff, which urllib3's immediate retries would only lengthen. It fails with
`KubeError` like every other call (status 0 when no answer came).
"""

from __future__ import annotations

import copy
from typing import Any, Final

import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from ai_models.adapters.kube.errors import KubeError
from ai_models.adapters.kube.request_counting import CountingApiClient, RequestObserver

VERSION_PATH: Final = "/version"
_TRANSPORT_FAILURES: Final = (urllib3.exceptions.HTTPError, OSError)


def make_default(configuration: Any) -> None:
    """Make `configuration` the library's default: the leader election's Lease clients
    (`adapters.kube.leases`) are built from it."""
    k8s.Configuration.set_default(configuration)


def probe_version(
    configuration: Any, *, timeout: tuple[float, float], observe: RequestObserver | None = None
) -> str:
    """One GET of the server's version with `configuration`, not retried; its gitVersion."""
    probe_configuration = copy.deepcopy(configuration)
    probe_configuration.retries = 0
    probe = CountingApiClient(probe_configuration, observe=observe)
    try:
        return str(k8s.VersionApi(probe).get_code(_request_timeout=timeout).git_version)
    except ApiException as error:
        raise KubeError.answered(
            "get", "endpoint", VERSION_PATH, "", status=error.status or 0, body=_raw(error.body)
        ) from error
    except _TRANSPORT_FAILURES as error:
        raise KubeError.unanswered("get", "endpoint", VERSION_PATH, "", error) from error
    finally:
        probe.close()


def api_client(configuration: Any, *, observe: RequestObserver | None = None) -> Any:
    """A client of its own with a copy of `configuration` (close it when done); each of its
    requests is reported to `observe`."""
    return CountingApiClient(copy.deepcopy(configuration), observe=observe)


def _raw(body: Any) -> bytes:
    return body if isinstance(body, bytes) else str(body or "").encode()
