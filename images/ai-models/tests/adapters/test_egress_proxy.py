"""The Hub and object store clients on a cluster whose egress is an HTTP proxy (D125): the
environment the chart renders from global.clusterConfiguration.proxy, a real forward proxy on
127.0.0.1, the fake Hub on a name only that proxy resolves, and moto.

The Hub's name resolves nowhere but in the proxy, so a Hub request that ignored HTTP_PROXY fails;
the store's host is in NO_PROXY, so the proxy must carry none of its requests. https goes through
the proxy's CONNECT tunnels (HTTPS_PROXY), plain http as absolute-URI requests (HTTP_PROXY)."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator

import pytest

from ai_models.adapters.hub import HubClient, HubQuery, ProviderUnavailable
from ai_models.adapters.hub.repository import HubRepository
from ai_models.adapters.objectstore import S3Store
from fakes.hub import FakeHub, make_corpus, repository
from fakes.model_files import FileContent
from fakes.s3 import MotoS3, S3Bucket, isolate_aws_environment, start_moto_server
from support.forward_proxy import ForwardProxy

# Names no resolver answers, only the proxy's table: one of the reserved .test domain, and a
# single label for the store (moto reads a dotted Host as a bucket's virtual host).
HUB_HOST = "hub.egress.test"
STORE_HOST = "egress-store"
# What the chart renders for an in-cluster store (templates/_proxy.tpl): loopback, the cluster,
# the store's host.
IN_CLUSTER_NO_PROXY = "127.0.0.1,localhost,::1,cluster.local,.svc,10.111.0.0/16,10.222.0.0/16"
REPO = "acme/egress-tiny"
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY")


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[ForwardProxy]:
    """The proxy, running, in HTTP(S)_PROXY in both spellings (as the chart renders them)."""
    with ForwardProxy(hosts={HUB_HOST: "127.0.0.1", STORE_HOST: "127.0.0.1"}) as running:
        for name in PROXY_VARIABLES:
            monkeypatch.delenv(name, raising=False)
            monkeypatch.delenv(name.lower(), raising=False)
        for name in ("HTTP_PROXY", "HTTPS_PROXY"):
            monkeypatch.setenv(name, running.url)
            monkeypatch.setenv(name.lower(), running.url)
        no_proxy(monkeypatch, IN_CLUSTER_NO_PROXY)
        yield running


def no_proxy(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("NO_PROXY", value)
    monkeypatch.setenv("no_proxy", value)


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    with FakeHub(make_corpus(40)) as running:
        yield running


def behind_the_proxy(url: str, host: str) -> str:
    """`url` on `host` instead of 127.0.0.1: reachable only through the proxy."""
    parsed = urllib.parse.urlsplit(url)
    return parsed._replace(netloc=f"{host}:{parsed.port}").geturl()


def test_catalog_indexing_lists_the_hub_through_the_proxy(proxy: ForwardProxy, hub: FakeHub) -> None:
    endpoint = behind_the_proxy(hub.url, HUB_HOST)
    with HubClient(endpoint=endpoint, token=None) as client:
        page = client.list_page(HubQuery(limit=10), None)
        assert len(page.models) == 10
        assert page.next_cursor is not None
        client.list_page(HubQuery(limit=10), page.next_cursor)
    target = f"{HUB_HOST}:{urllib.parse.urlsplit(hub.url).port}"
    assert proxy.count(target) == 2
    assert {item.path.split("?")[0] for item in proxy.carried()} == {"/api/models"}


def test_publication_downloads_the_files_through_the_proxy(proxy: ForwardProxy, hub: FakeHub) -> None:
    contents: dict[str, FileContent] = {"config.json": b'{"model_type": "llama"}', "model.bin": b"w" * 4096}
    model = repository(REPO, contents)
    hub.add(model)
    reader = HubRepository(endpoint=behind_the_proxy(hub.url, HUB_HOST), token=None)

    snapshot = reader.repository_snapshot(REPO, "main")
    with reader.open_file(REPO, snapshot.sha, "model.bin", size=4096) as remote:
        assert remote.read() == b"w" * 4096

    target = f"{HUB_HOST}:{urllib.parse.urlsplit(hub.url).port}"
    assert [item.method for item in proxy.carried() if item.target == target] == ["GET", "GET"]
    assert proxy.carried()[-1].path == f"/{REPO}/resolve/{model.sha}/model.bin"


def test_the_store_in_no_proxy_is_reached_directly(
    proxy: ForwardProxy, s3_bucket: S3Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_aws_environment(monkeypatch)
    store = S3Store(s3_bucket.name, endpoint_url=s3_bucket.server.endpoint_url)
    store.put_bytes("egress/direct", b"payload")
    assert store.get_bytes("egress/direct") == b"payload"
    assert proxy.carried() == []


def test_a_store_outside_no_proxy_is_reached_through_the_proxy(
    proxy: ForwardProxy, s3_bucket: S3Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same client, the store now outside the cluster: botocore takes HTTP_PROXY, so the
    # direct path above is NO_PROXY's doing and not a client that ignores the proxy.
    isolate_aws_environment(monkeypatch)
    endpoint = behind_the_proxy(s3_bucket.server.endpoint_url, STORE_HOST)
    store = S3Store(s3_bucket.name, endpoint_url=endpoint)
    store.put_bytes("egress/proxied", b"payload")
    assert store.get_bytes("egress/proxied") == b"payload"
    assert {item.method for item in proxy.carried()} == {"PUT", "GET"}
    assert proxy.targets() == {f"{STORE_HOST}:{urllib.parse.urlsplit(endpoint).port}"}


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoS3]:
    """moto over HTTPS (its certificate names localhost and 127.0.0.1, signed by its own CA)."""
    with start_moto_server(tmp_path_factory.mktemp("moto-tls"), tls=True) as server:
        yield server


def test_https_goes_through_a_connect_tunnel(
    proxy: ForwardProxy, tls_server: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_aws_environment(monkeypatch)
    tls_server.create_bucket("egress-tls")  # directly: 127.0.0.1 is in NO_PROXY
    no_proxy(monkeypatch, "cluster.local,.svc")
    port = urllib.parse.urlsplit(tls_server.endpoint_url).port
    store = S3Store("egress-tls", endpoint_url=f"https://localhost:{port}", verify=str(tls_server.ca_file))
    store.put_bytes("egress/tunnelled", b"payload")
    assert store.get_bytes("egress/tunnelled") == b"payload"
    # The Hub client tunnels an https endpoint as well; the request then fails inside the tunnel
    # (moto's certificate is not one the Hub client trusts), past the proxy.
    with (
        HubClient(endpoint=f"https://{HUB_HOST}:{port}", token=None, max_retries=0) as client,
        pytest.raises(ProviderUnavailable),
    ):
        client.list_page(HubQuery(limit=1), None)
    assert {(item.method, item.target) for item in proxy.carried()} == {
        ("CONNECT", f"localhost:{port}"),
        ("CONNECT", f"{HUB_HOST}:{port}"),
    }


def test_the_hub_client_follows_a_proxy_set_after_an_earlier_client(
    hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Hub's HTTP clients are shared per process; one built before the proxy settings changed
    # must not carry the old ones into later requests.
    with HubClient(endpoint=hub.url, token=None) as client:
        client.list_page(HubQuery(limit=1), None)
    with ForwardProxy(hosts={HUB_HOST: "127.0.0.1"}) as running:
        monkeypatch.setenv("HTTP_PROXY", running.url)
        monkeypatch.setenv("http_proxy", running.url)
        no_proxy(monkeypatch, IN_CLUSTER_NO_PROXY)
        with HubClient(endpoint=behind_the_proxy(hub.url, HUB_HOST), token=None) as client:
            assert len(client.list_page(HubQuery(limit=1), None).models) == 1
        assert len(running.carried()) == 1
