"""A `kubernetes` ApiClient for the module's processes: in-cluster config or KUBECONFIG, bounded retries.

Inside a pod the ServiceAccount token and CA are used (the client re-reads the projected token
as it rotates); elsewhere (the local stack, tests) the kubeconfig named by `KUBECONFIG` or
`~/.kube/config`. Every request gets a timeout, and failures that are safe to repeat are retried
a bounded number of times with exponential backoff by urllib3, so a blip in the API server does
not fail a request, while a dead API server fails it within seconds instead of hanging.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from typing import Any, Final

import urllib3
from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException

from ai_models.adapters.kube.request_counting import CountingApiClient, RequestObserver

log = logging.getLogger(__name__)

IN_CLUSTER_HOST_ENV: Final = "KUBERNETES_SERVICE_HOST"
IN_CLUSTER_TOKEN_FILE: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
DEFAULT_KUBECONFIG: Final = "~/.kube/config"
# Answers that mean "try again": throttled, or an apiserver/proxy momentarily unavailable.
RETRY_STATUSES: Final = frozenset({429, 502, 503, 504})
IDEMPOTENT_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


class KubeConfigError(RuntimeError):
    """No usable Kubernetes client configuration; the message says where it looked and what to set."""


@dataclasses.dataclass(frozen=True)
class ClientOptions:
    """How patient a client is. Defaults suit request-serving code: about 2 s of retries at most.

    `retry_posts` also retries POSTs on the statuses above; only for POSTs without side effects
    (TokenReview, SubjectAccessReview), never for creates. Connection failures are retried for
    every method, since the request never reached the server.
    """

    retries: int = 3
    backoff_seconds: float = 0.2
    connect_timeout_seconds: float = 3.0
    read_timeout_seconds: float = 10.0
    retry_posts: bool = False

    @property
    def request_timeout(self) -> tuple[float, float]:
        """The `_request_timeout` to pass to every API call."""
        return (self.connect_timeout_seconds, self.read_timeout_seconds)


def retry_policy(options: ClientOptions) -> urllib3.Retry:
    methods = IDEMPOTENT_METHODS | ({"POST"} if options.retry_posts else set())
    return urllib3.Retry(
        total=options.retries,
        connect=options.retries,
        read=options.retries,
        status=options.retries,
        backoff_factor=options.backoff_seconds,
        backoff_max=5.0,
        status_forcelist=RETRY_STATUSES,
        allowed_methods=methods,
        respect_retry_after_header=True,
        # After the last retry the API's own answer (e.g. 503 Status) reaches the caller as an
        # ApiException, which says more than urllib3's "too many retries".
        raise_on_status=False,
    )


def in_cluster() -> bool:
    return bool(os.environ.get(IN_CLUSTER_HOST_ENV)) and IN_CLUSTER_TOKEN_FILE.exists()


def load_configuration(*, kubeconfig: str | None = None, context: str | None = None) -> Any:
    """A `kubernetes.client.Configuration` from the pod's ServiceAccount or from a kubeconfig.

    `kubeconfig` (a path, or several joined with `:`) wins over the environment; without it the
    pod's ServiceAccount is used inside a pod, else `KUBECONFIG`, else `~/.kube/config`.
    """
    configuration = client.Configuration()
    if kubeconfig is None and in_cluster():
        try:
            config.load_incluster_config(client_configuration=configuration)
        except ConfigException as error:
            raise KubeConfigError(
                f"cannot use the pod's ServiceAccount ({IN_CLUSTER_TOKEN_FILE}): {error}; "
                "check that the pod mounts its ServiceAccount token (automountServiceAccountToken)"
            ) from error
        return configuration
    path = kubeconfig or os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
    try:
        config.load_kube_config(
            config_file=os.path.expanduser(path),
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except (ConfigException, OSError) as error:
        raise KubeConfigError(
            f"cannot load the kubeconfig {path!r}: {error}; outside a pod set KUBECONFIG to a readable "
            "kubeconfig whose current context can reach the cluster"
        ) from error
    return configuration


def new_api_client(
    options: ClientOptions | None = None,
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    observe: RequestObserver | None = None,
) -> Any:
    """A `kubernetes.client.ApiClient` with `options`' retries; close it when done. Each request
    is reported to `observe` (the process's request counter).

    Pass `options.request_timeout` as `_request_timeout` to each call: the client has no default.
    """
    options = options or ClientOptions()
    configuration = load_configuration(kubeconfig=kubeconfig, context=context)
    configuration.retries = retry_policy(options)
    log.info(
        "kubernetes client configured",
        extra={"server": configuration.host, "in_cluster": kubeconfig is None and in_cluster()},
    )
    return CountingApiClient(configuration, observe=observe)
