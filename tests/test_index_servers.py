"""The Elasticsearch, OpenSearch and Solr index writers against the wire-level test server:
batching by documents and bytes, retries with backoff of whole requests and of only the failed
actions (the server failing half of each bulk), authentication, and errors that stop them."""

from __future__ import annotations

import base64
import json
import socket
import time

import pytest

from nutchy.config import load_settings
from nutchy.exceptions import ConfigError, IndexWriterError
from nutchy.index.chain import load_writers
from nutchy.index.document import STANDARD_FIELDS, Document
from nutchy.index.servers import ElasticsearchIndexWriter, OpenSearchIndexWriter, SolrIndexWriter
from nutchy.testing.search_server import SearchServer

FAST = {"backoff": 0.001, "retries": 5, "timeout": 5}


def docs(*names):
    return [Document(f"http://a.com/{n}", title=n.upper(), content=f"text of {n}") for n in names]


def bulk_ids(server):
    """The ids of each bulk request the server received, in order."""
    out = []
    for request in server.requests:
        if request.path.endswith("/_bulk"):
            lines = [json.loads(line) for line in request.body.splitlines()]
            out.append(
                [
                    next(iter(a.values()))["_id"]
                    for a in lines
                    if len(a) == 1 and "_id" in next(iter(a.values()), {})
                ]
            )
    return out


@pytest.fixture(scope="module")
def es():
    with SearchServer("elasticsearch") as server:
        yield server


@pytest.fixture(scope="module")
def solr():
    with SearchServer("solr") as server:
        yield server


@pytest.fixture(autouse=True)
def _clear(request):
    for name in ("es", "solr"):
        if name in request.fixturenames:
            request.getfixturevalue(name).clear()


def elastic_writer(server, **options):
    writer = ElasticsearchIndexWriter(server.url, index="crawl", **{**FAST, **options})
    writer.open()
    return writer


def test_documents_and_deletions_reach_the_index_in_batches(es):
    writer = elastic_writer(es, max_docs=2)
    writer.write(docs("a", "b", "c"))
    writer.delete(["http://a.com/b", "http://a.com/never"])
    writer.write(docs("d"))
    writer.commit()
    writer.close()
    stored = es.documents("crawl", visible=True)
    assert sorted(stored) == ["http://a.com/a", "http://a.com/c", "http://a.com/d"]
    assert stored["http://a.com/a"]["title"] == "A"
    assert stored["http://a.com/a"]["anchor"] == []
    assert "lastModified" not in stored["http://a.com/a"]  # unknown: left out
    # a, b flushed at two; c and the delete of b fill the next; the rest at commit.
    assert [len(ids) for ids in bulk_ids(es)] == [2, 2, 2]
    assert es.requests[-1].path == "/crawl/_refresh"


def test_one_action_per_url_the_last_asked(es):
    writer = elastic_writer(es)
    writer.write(docs("a"))
    writer.delete(["http://a.com/a"])
    writer.write(docs("b"))
    writer.delete(["http://a.com/b"])
    writer.write(docs("b"))
    writer.commit()
    assert sorted(es.documents("crawl")) == ["http://a.com/b"]
    assert bulk_ids(es) == [["http://a.com/a", "http://a.com/b"]]


def test_batches_are_cut_by_bytes(es):
    writer = elastic_writer(es, max_bytes=600)
    big = [Document(f"http://a.com/{i}", content="x" * 400) for i in range(3)]
    writer.write(big)
    writer.commit()
    assert [len(ids) for ids in bulk_ids(es)] == [1, 1, 1]
    assert max(len(r.body) for r in es.requests if r.path.endswith("_bulk")) <= 600


def test_a_server_failing_half_of_each_bulk_gets_only_the_failed_items_again(es):
    es.fail_half(3)  # 8 items: 4 fail, then 2 of those 4, then 1 of those 2
    writer = elastic_writer(es)
    writer.write(docs(*"abcdefgh"))
    writer.commit()
    ids = bulk_ids(es)
    assert [len(batch) for batch in ids] == [8, 4, 2, 1]
    assert ids[1] == ids[0][1::2]
    assert ids[2] == ids[1][1::2]
    assert len(es.documents("crawl", visible=True)) == 8
    assert writer.resent == 7


def test_whole_requests_are_retried_after_429_and_503(es):
    writer = elastic_writer(es)
    es.reject(1, 429, retry_after=None)
    es.reject(1, 503, retry_after=None)
    writer.write(docs("a"))
    writer.commit()
    assert list(es.documents("crawl", visible=True)) == ["http://a.com/a"]
    assert len(bulk_ids(es)) == 3


def test_retry_after_is_honoured(es):
    writer = elastic_writer(es)
    es.reject(1, 429, retry_after=1)
    writer.write(docs("a"))
    started = time.monotonic()
    writer.commit()
    assert time.monotonic() - started >= 1.0
    assert len(es.documents("crawl")) == 1


def test_it_gives_up_after_its_retries(es):
    writer = elastic_writer(es, retries=2)
    es.reject(5, 503, retry_after=None)
    writer.write(docs("a"))
    with pytest.raises(IndexWriterError, match=r"gave up after 3 attempts: POST /crawl/_bulk: 503"):
        writer.commit()
    es.clear()
    es.fail_half(5)  # 8 actions, then 4, then 2 fail: one is still failing after 2 retries
    writer.write(docs(*"abcdefgh"))
    with pytest.raises(IndexWriterError, match="gave up after 3 attempts: 1 actions rejected"):
        writer.commit()


def test_a_document_refused_for_good_is_an_error_after_the_rest_is_sent():
    with SearchServer(fields=STANDARD_FIELDS) as server:
        writer = ElasticsearchIndexWriter(server.url, index="crawl", **FAST)
        writer.open()
        good = Document("http://a.com/ok")
        bad = Document("http://a.com/bad", metadata={"lang": "en"})
        writer.write([bad, good])
        with pytest.raises(IndexWriterError) as caught:
            writer.commit()
    message = str(caught.value)
    assert "1 actions refused: index http://a.com/bad: strict_dynamic_mapping_exception" in message
    assert "dynamic introduction of [lang]" in message
    assert list(server.documents("crawl")) == ["http://a.com/ok"]


def test_authentication_settings():
    key = base64.b64encode(b"kid:ksecret").decode()
    with SearchServer(
        users={"elastic": "pw"}, api_keys={"kid": "ksecret"}, tokens={"tok"}
    ) as server:
        for auth in (
            {"username": "elastic", "password": "pw"},
            {"api_key": key},
            {"api_key": "kid:ksecret"},
            {"bearer_token": "tok"},
        ):
            elastic_writer(server, **auth).close()
        writer = ElasticsearchIndexWriter(server.url, password="wrong", username="elastic", **FAST)
        with pytest.raises(IndexWriterError, match="GET /: 401 security_exception: unable to"):
            writer.open()
    with pytest.raises(ConfigError, match="not several"):
        ElasticsearchIndexWriter("http://x", username="u", api_key="k")
    with pytest.raises(ConfigError, match="NUTCH_SOLR_SERVER_URL holds credentials"):
        SolrIndexWriter("http://solr:SolrRocks@x:8983/solr/nutch")
    with pytest.raises(ConfigError, match="NUTCH_ELASTIC_URL must start with http"):
        ElasticsearchIndexWriter("localhost:9200")


def test_the_writer_checks_the_product_and_version():
    with SearchServer("opensearch") as server:
        with pytest.raises(
            IndexWriterError,
            match=r"OpenSearch 2\.17\.0; this writer is for Elasticsearch .*use nutchy.index.servers.OpenSearchIndexWriter",
        ):
            elastic_writer(server)
        writer = OpenSearchIndexWriter(server.url, index="crawl", **FAST)
        writer.open()
        writer.write(docs("a"))
        writer.commit()
        assert len(server.documents("crawl", visible=True)) == 1


def test_an_unreachable_server_is_retried_then_an_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    writer = ElasticsearchIndexWriter(
        f"http://127.0.0.1:{port}", backoff=0.001, retries=1, timeout=1
    )
    with pytest.raises(IndexWriterError, match="gave up after 2 attempts: GET /: "):
        writer.open()
    writer.write(docs("a"))
    with pytest.raises(IndexWriterError, match="gave up after 2 attempts"):
        writer.commit()


def test_rebuild_empties_the_index(es):
    writer = elastic_writer(es)
    writer.write(docs("a", "b"))
    writer.commit()
    rebuilt = ElasticsearchIndexWriter(es.url, index="crawl", **FAST)
    rebuilt.open(rebuild=True)
    assert es.documents("crawl", visible=True) == {}


def test_built_from_settings_by_load_writers(es):
    settings = load_settings(
        {
            "NUTCH_INDEX_WRITERS": {"nutchy.index.servers.ElasticsearchIndexWriter": 100},
            "NUTCH_ELASTIC_URL": es.url,
            "NUTCH_ELASTIC_INDEX": "fromsettings",
            "NUTCH_ELASTIC_MAX_BULK_DOCS": 3,
            "NUTCH_ELASTIC_EXPONENTIAL_BACKOFF_MILLIS": 1,
            "NUTCH_ELASTIC_TLS_VERIFY": "false",
        },
        project=False,
    )
    (writer,) = load_writers(settings)
    assert (writer.index, writer.max_docs, writer.backoff) == ("fromsettings", 3, 0.001)
    assert writer._http.connection_pool_kw["cert_reqs"] == "CERT_NONE"
    with pytest.raises(ConfigError, match="NUTCH_ELASTIC_INDEX is not a valid index name"):
        load_writers(load_settings({**settings.copy_to_dict(), "NUTCH_ELASTIC_INDEX": "Bad"}))


# --- Solr ----------------------------------------------------------------------------------------


def solr_writer(server, **options):
    writer = SolrIndexWriter(f"{server.url}/nutch", **{**FAST, **options})
    writer.open()
    return writer


def test_solr_adds_deletes_in_order_and_commits(solr):
    writer = solr_writer(solr, max_docs=3)
    writer.write(docs("a", "b"))
    writer.delete(["http://a.com/a"])
    writer.write(docs("c"))
    writer.commit()
    assert sorted(solr.documents("nutch", visible=True)) == ["http://a.com/b", "http://a.com/c"]
    first = solr.requests[0].body
    assert first.startswith(b'{"add":{"doc":{"id":"http://a.com/b"')  # a's delete came last
    assert b'"delete":{"id":"http://a.com/a"}' in first
    assert solr.requests[-1].body == b'{"commit":{}}'


def test_solr_tolerant_chain_gets_only_the_failed_commands_again():
    with SearchServer("solr", solr_tolerant=True) as server:
        server.fail_half(2)
        writer = solr_writer(server)
        writer.write(docs(*"abcd"))
        writer.commit()
        bodies = [r.body for r in server.requests if r.body != b'{"commit":{}}']
        assert [b.count(b'"add"') for b in bodies] == [4, 2, 1]
        assert len(server.documents("nutch", visible=True)) == 4


def test_solr_without_a_tolerant_chain_sends_a_failed_request_again_whole(solr):
    solr.fail_half(1)
    writer = solr_writer(solr)
    writer.write(docs(*"abcd"))
    writer.commit()
    bodies = [r.body for r in solr.requests if r.body != b'{"commit":{}}']
    assert [b.count(b'"add"') for b in bodies] == [4, 4]
    assert len(solr.documents("nutch", visible=True)) == 4


def test_solr_refusing_a_document_is_an_error():
    with SearchServer("solr", fields={"id", "url"}) as server:
        writer = solr_writer(server)
        writer.write(docs("a"))
        with pytest.raises(
            IndexWriterError, match=r"400 ERROR: \[doc=http://a.com/a\] unknown field"
        ):
            writer.commit()


def test_solr_basic_and_bearer_auth_and_rebuild():
    with SearchServer("solr", users={"solr": "SolrRocks"}, tokens={"jwt"}) as server:
        writer = solr_writer(server, username="solr", password="SolrRocks")
        writer.write(docs("a"))
        writer.commit()
        assert len(server.documents("nutch", visible=True)) == 1
        solr_writer(server, bearer_token="jwt", retries=0).open(rebuild=True)
        assert server.documents("nutch", visible=True) == {}
        writer = solr_writer(server)
        writer.write(docs("a"))
        with pytest.raises(IndexWriterError, match="401 require authentication"):
            writer.commit()
