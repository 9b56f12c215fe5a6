"""Outbound HTTP to Hub endpoints (catalog sources, the module's Hugging Face endpoint, publisher
downloads): one place that decides where a request may go and how much of an answer is read.

- Addresses. Cloud metadata services (`169.254.169.254`, `169.254.170.2`, `fd00:ec2::254`,
  `100.100.100.200`, `metadata.google.internal`) are never contacted; link-local networks
  (`169.254.0.0/16`, `fe80::/10`) only when the admin allows it (setting
  `sources.allowLinkLocalEndpoints`). The URL's host is checked before each request, and the
  address the connection actually reached is checked again right after connecting, before a
  byte is sent, so a name that resolves (or rebinds) to such an address is refused too.
- Redirects are followed by hand, at most `max_redirects`. API answers must stay on the origin
  (scheme, host and port) they were asked of; only file bodies may move to another host (the
  Hub sends LFS files to its CDN), never from https to http, and without the token.
- Bodies are read in pieces and counted: past `max_bytes` (or a `Content-Length` above it) the
  answer is dropped, and a body that takes longer than its deadline is abandoned. Error bodies
  are never read: what a remote says is never shown to users (see errors.py).
- Momentary failures (5xx, broken connections, timeouts) are retried a few times with backoff.
- The cluster's egress proxy (HTTP_PROXY / HTTPS_PROXY / NO_PROXY, which the chart renders from
  the cluster's proxy settings) is used as httpx reads it. Through a proxy the address checked
  after connecting is the proxy's own: the proxy resolves the Hub's name, so what that name
  resolves to is the proxy's policy; the URL's host is still checked before each request (D125).

Every refusal is an `EndpointProblem` whose text is our own words only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import re
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

import httpx2

from ai_models.adapters.hub.text import origin
from ai_models.domain.backoff import Backoff

METADATA_HOSTS: Final = frozenset({"metadata.google.internal", "metadata.goog", "metadata"})
METADATA_NETWORKS: Final = tuple(
    ipaddress.ip_network(network)
    for network in ("169.254.169.254/32", "169.254.170.2/32", "100.100.100.200/32", "fd00:ec2::254/128")
)
LINK_LOCAL_NETWORKS: Final = tuple(
    ipaddress.ip_network(network) for network in ("169.254.0.0/16", "fe80::/10")
)
REDIRECT_STATUSES: Final = frozenset({301, 302, 303, 307, 308})
RETRY_STATUSES: Final = frozenset({500, 502, 503, 504})
DEFAULT_MAX_REDIRECTS: Final = 5

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class EndpointProblem(Exception):
    """A request was not sent, or its answer not used, for a reason of ours (the text says which)."""


class AddressRefused(EndpointProblem):
    """The endpoint (or a redirect, or what its name resolved to) is an address the module refuses."""


class RedirectRefused(EndpointProblem):
    pass


class BodyTooLarge(EndpointProblem):
    pass


def peer_check(policy: EndpointPolicy) -> Callable[[str, Mapping[str, Any]], None]:
    """httpcore's trace hook that refuses a connected address `policy` refuses (`AddressRefused`).

    It runs after the TCP connect, before TLS and before any request byte, so a name that resolves
    to a refused address gets nothing. Through a proxy the address is the proxy's, which resolves
    the name. Every outbound client of the module sets it on each request.
    """

    def check(event: str, info: Mapping[str, Any]) -> None:
        if not event.endswith("connect_tcp.complete"):
            return
        stream = info.get("return_value")
        if stream is None:
            return
        peer = stream.get_extra_info("server_addr")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        problem = policy.address_problem(address)
        if problem is not None:
            stream.close()
            raise AddressRefused(f"its host resolved to an address that {problem}")

    return check


class BodyTooSlow(EndpointProblem):
    pass


@dataclasses.dataclass(frozen=True, kw_only=True)
class EndpointPolicy:
    """Where Hub requests of this process may go; one per process, from the module settings."""

    allow_link_local: bool = False
    max_redirects: int = DEFAULT_MAX_REDIRECTS
    # More networks to refuse; tests refuse loopback to show that resolved addresses are checked.
    refused_networks: tuple[Network, ...] = ()

    def address_problem(self, address: str) -> str | None:
        """Why a connection to `address` (an IP literal) is refused, or None."""
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return None
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if any(ip in network for network in METADATA_NETWORKS):
            return "is a cloud metadata address, which the module never contacts"
        if not self.allow_link_local and any(ip in network for network in LINK_LOCAL_NETWORKS):
            return (
                "is a link-local address; the module contacts one only when the module setting "
                "sources.allowLinkLocalEndpoints is true"
            )
        if any(ip in network for network in self.refused_networks):
            return "is in a network this process refuses"
        return None

    def url_problem(self, url: str) -> str | None:
        """Why `url` is not requested at all, or None."""
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https"):
            return "is not an http or https URL"
        host = (parsed.hostname or "").rstrip(".").lower()
        if not host:
            return "has no host"
        if host in METADATA_HOSTS:
            return "names a cloud metadata service, which the module never contacts"
        return self.address_problem(host)


# The process's policy: strict until its main says otherwise.
_DEFAULT_POLICY: dict[str, EndpointPolicy] = {"policy": EndpointPolicy()}


def set_default_policy(policy: EndpointPolicy) -> None:
    """The policy of adapters built without one; a process's main sets it from its settings."""
    _DEFAULT_POLICY["policy"] = policy


def default_policy() -> EndpointPolicy:
    return _DEFAULT_POLICY["policy"]


_ProxyKey = tuple[tuple[str, str], ...]
_CLIENTS: dict[tuple[EndpointPolicy, _ProxyKey], httpx2.Client] = {}
_CLIENTS_LOCK = threading.Lock()


def proxy_environment() -> _ProxyKey:
    """The egress proxy settings of the environment (HTTP_PROXY, HTTPS_PROXY, NO_PROXY, ... as
    urllib reads them, the lower-case spelling first), as a key.

    httpx takes them from the environment when a client is built (`trust_env`), so a client holds
    the settings of its birth; the shared clients are keyed by them too, and a process whose
    settings change (the test bed, a CLI run after `export`) never keeps a stale proxy."""
    return tuple(sorted(urllib.request.getproxies_environment().items()))


def session(policy: EndpointPolicy) -> httpx2.Client:
    """The shared client of `policy` under the current proxy settings: connection reuse across
    requests, never following redirects. It goes through HTTP_PROXY / HTTPS_PROXY except to the
    hosts and networks in NO_PROXY (httpx reads them: CIDRs, `.suffix` and `*` included)."""
    key = (policy, proxy_environment())
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = httpx2.Client(follow_redirects=False, timeout=None)
            _CLIENTS[key] = client
        return client


@dataclasses.dataclass(frozen=True, kw_only=True)
class Request:
    """One GET and how it may be answered."""

    url: str
    headers: Mapping[str, str]
    timeout: httpx2.Timeout
    params: list[tuple[str, str]] | None = None
    other_hosts: bool = False  # may a redirect leave the origin (file bodies only)
    max_retries: int = 2
    retry_wait: float = 0.5


@dataclasses.dataclass(frozen=True)
class Answer:
    status: int
    headers: httpx2.Headers
    url: str
    body: bytes
    next_link: str | None = None  # the `Link: <...>; rel="next"` URL as sent


class Sender:
    """Sends `Request`s under one policy; `clock` and `sleep` are injectable for tests."""

    def __init__(
        self,
        policy: EndpointPolicy | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.policy = policy if policy is not None else default_policy()
        self._clock = clock
        self._sleep = sleep

    def get(self, request: Request, *, max_bytes: int, deadline: float) -> Answer:
        """The final answer with its body (at most `max_bytes`, read within `deadline` seconds);
        an error answer (>= 400) comes back with an empty body, unread."""
        attempt = 0
        while True:
            try:
                with self.open(request) as response:
                    if response.status_code in RETRY_STATUSES and attempt < request.max_retries:
                        raise _Retry
                    body = b"" if response.status_code >= 400 else self._read(response, max_bytes, deadline)
                    next_link = response.links.get("next", {}).get("url")
                    return Answer(response.status_code, response.headers, str(response.url), body, next_link)
            except (_Retry, httpx2.TransportError) as error:
                if isinstance(error, httpx2.TransportError) and attempt >= request.max_retries:
                    raise
                attempt += 1
                self._sleep(Backoff(base=request.retry_wait, cap=4 * request.retry_wait).delay(attempt))

    @contextlib.contextmanager
    def open(self, request: Request) -> Iterator[httpx2.Response]:
        """The final answer to `request`, its body not read yet; closed with the block."""
        response = self._follow(request)
        try:
            yield response
        finally:
            response.close()

    def _follow(self, request: Request) -> httpx2.Response:
        client = session(self.policy)
        url = request.url
        params = httpx2.QueryParams(tuple(request.params)) if request.params is not None else None
        headers = dict(request.headers)
        start = origin(url)
        for _hop in range(self.policy.max_redirects + 1):
            problem = self.policy.url_problem(url)
            if problem is not None:
                raise AddressRefused(f"the URL {problem}")
            sent = client.build_request("GET", url, params=params, headers=headers, timeout=request.timeout)
            sent.extensions["trace"] = peer_check(self.policy)
            response = client.send(sent, stream=True)
            location = response.headers.get("Location")
            if response.status_code not in REDIRECT_STATUSES or location is None:
                return response
            response.close()
            try:
                target = urllib.parse.urljoin(str(sent.url), location)
                moved = origin(target) != start
            except ValueError:  # urllib's words on a bad authority, such as an unclosed IPv6 bracket
                raise RedirectRefused("it redirected to a malformed URL") from None
            if moved:
                if not request.other_hosts:
                    raise RedirectRefused(
                        "it redirected to another host, port or scheme; API requests follow redirects "
                        "on the endpoint's own origin only"
                    )
                if urllib.parse.urlsplit(url).scheme == "https" and not target.startswith("https://"):
                    raise RedirectRefused("it redirected from https to plain http")
                # The token stays on the origin it was given for.
                headers = {key: value for key, value in headers.items() if key.lower() != "authorization"}
            url, params = target, None
        raise RedirectRefused(f"it redirected more than {self.policy.max_redirects} times")

    def _read(self, response: httpx2.Response, max_bytes: int, deadline: float) -> bytes:
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise BodyTooLarge(f"it announced {int(declared)} bytes, more than the {max_bytes} allowed")
        until = self._clock() + deadline
        body = bytearray()
        for piece in response.iter_bytes():
            body += piece
            if len(body) > max_bytes:
                raise BodyTooLarge(f"its answer grew past the {max_bytes} bytes allowed")
            if self._clock() > until:
                raise BodyTooSlow(f"its answer took longer than {deadline:g}s to arrive")
        return bytes(body)


class _Retry(Exception):
    """A momentary server error to try again."""


_ERROR_CODE: Final = re.compile(r"[A-Za-z][A-Za-z0-9]{0,39}")


def error_code(headers: Mapping[str, str]) -> str | None:
    """The provider's `X-Error-Code` when it is a plain identifier; anything else is not repeated."""
    code = headers.get("X-Error-Code", "")
    return code if _ERROR_CODE.fullmatch(code) else None
