"""The wire-level search test server (nutchy.testing.search_server), spoken to over raw HTTP:
the request and response formats of Elasticsearch 8.x / OpenSearch 2.x bulk and of Solr 9.x's
JSON update API, their errors, authentication, and the knobs that make it fail."""

from __future__ import annotations

import base64
import json

import pytest
import urllib3

from nutchy.testing.search_server import SearchServer

HTTP = urllib3.PoolManager(retries=False, timeout=5)
NDJSON = {"Content-Type": "application/x-ndjson"}
JSON = {"Content-Type": "application/json"}


def call(server, method, path, body=None, headers=None):
    response = HTTP.request(method, server.url + path, body=body, headers=headers or {})
    return response.status, json.loads(response.data), response.headers


def ndjson(*lines):
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


@pytest.fixture(scope="module")
def elastic():
    with SearchServer("elasticsearch", fields={"id", "url", "title"}) as server:
        yield server


@pytest.fixture(scope="module")
def solr():
    with SearchServer("solr", fields={"id", "url", "title"}) as server:
        yield server


@pytest.fixture(autouse=True)
def _clear(request):
    for name in ("elastic", "solr"):
        if name in request.fixturenames:
            request.getfixturevalue(name).clear()


def test_banners_say_which_server_and_version():
    with SearchServer("opensearch") as server:
        status, body, _ = call(server, "GET", "/")
    assert status == 200
    assert body["version"]["distribution"] == "opensearch"
    assert body["version"]["number"].startswith("2.")


def test_bulk_index_and_delete(elastic):
    body = ndjson(
        {"index": {"_id": "a"}},
        {"url": "a", "title": "A"},
        {"index": {"_index": "other", "_id": "b"}},
        {"url": "b"},
        {"delete": {"_id": "nope"}},
        {"index": {"_id": "a"}},
        {"url": "a", "title": "A2"},
    )
    status, answer, headers = call(elastic, "POST", "/nutch/_bulk", body, NDJSON)
    assert status == 200
    assert headers["X-Elastic-Product"] == "Elasticsearch"
    assert answer["errors"] is False
    items = [(next(iter(i)), next(iter(i.values()))) for i in answer["items"]]
    assert [(k, v["status"], v.get("result")) for k, v in items] == [
        ("index", 201, "created"),
        ("index", 201, "created"),
        ("delete", 404, "not_found"),
        ("index", 200, "updated"),
    ]
    assert elastic.documents("nutch") == {"a": {"url": "a", "title": "A2"}}
    assert elastic.documents("other") == {"b": {"url": "b"}}
    # Visible to searches after a refresh only.
    assert call(elastic, "GET", "/nutch/_count")[1] == {"count": 0}
    assert call(elastic, "POST", "/nutch/_refresh")[0] == 200
    assert call(elastic, "GET", "/nutch/_count")[1] == {"count": 1}


def test_a_strict_mapping_refuses_an_item_and_applies_the_others(elastic):
    body = ndjson({"index": {"_id": "a"}}, {"bogus": 1}, {"index": {"_id": "b"}}, {"url": "b"})
    _, answer, _ = call(elastic, "POST", "/nutch/_bulk", body, NDJSON)
    assert answer["errors"] is True
    first = answer["items"][0]["index"]
    assert (first["status"], first["error"]["type"]) == (400, "strict_dynamic_mapping_exception")
    assert elastic.documents("nutch") == {"b": {"url": "b"}}


@pytest.mark.parametrize(
    ("body", "headers", "status", "reason"),
    [
        (b'{"index":{"_id":"a"}}\n{"url":"a"}', NDJSON, 400, "terminated by a newline"),
        (
            b'{"index":{"_id":"a"}}\n{"url":"a"}\n',
            {"Content-Type": "text/plain"},
            406,
            "text/plain",
        ),
        (b'{"index":{"_id":"a"}\n', NDJSON, 400, "Failed to parse"),
        (b'{"upsert":{"_id":"a"}}\n', NDJSON, 400, "Malformed action"),
    ],
)
def test_malformed_bulks_fail_whole(elastic, body, headers, status, reason):
    got, answer, _ = call(elastic, "POST", "/nutch/_bulk", body, headers)
    assert got == status
    assert reason in json.dumps(answer)
    assert elastic.documents("nutch") == {}


def test_an_index_is_needed_and_a_missing_one_is_404(elastic):
    got, answer, _ = call(elastic, "POST", "/_bulk", ndjson({"delete": {"_id": "a"}}), NDJSON)
    assert (got, answer["error"]["reason"]) == (400, "Validation Failed: 1: index is missing;")
    got, answer, _ = call(elastic, "POST", "/nope/_refresh")
    assert (got, answer["error"]["type"]) == (404, "index_not_found_exception")


def test_fail_half_rejects_every_second_item_with_429(elastic):
    elastic.fail_half(1)
    lines = []
    for i in range(4):
        lines += [{"index": {"_id": str(i)}}, {"url": str(i)}]
    _, answer, _ = call(elastic, "POST", "/nutch/_bulk", ndjson(*lines), NDJSON)
    assert answer["errors"] is True
    statuses = [item["index"]["status"] for item in answer["items"]]
    assert statuses == [201, 429, 201, 429]
    assert answer["items"][1]["index"]["error"]["type"] == "es_rejected_execution_exception"
    assert sorted(elastic.documents("nutch")) == ["0", "2"]
    # Only the next request was told to fail.
    _, answer, _ = call(elastic, "POST", "/nutch/_bulk", ndjson(*lines), NDJSON)
    assert answer["errors"] is False


def test_reject_fails_a_whole_request_with_retry_after(elastic):
    elastic.reject(1, 429, retry_after=3)
    body = ndjson({"index": {"_id": "a"}}, {"url": "a"})
    status, answer, headers = call(elastic, "POST", "/nutch/_bulk", body, NDJSON)
    assert (status, headers["Retry-After"], answer["status"]) == (429, "3", 429)
    assert elastic.documents("nutch") == {}
    assert call(elastic, "POST", "/nutch/_bulk", body, NDJSON)[0] == 200


def test_too_large_a_body_is_413():
    with SearchServer(max_content_length=100) as server:
        body = ndjson({"index": {"_id": "a"}}, {"url": "a" * 200})
        assert call(server, "POST", "/nutch/_bulk", body, NDJSON)[0] == 413


def test_authentication():
    key = base64.b64encode(b"key-id:key-secret").decode()
    with SearchServer(
        users={"elastic": "pw"}, api_keys={"key-id": "key-secret"}, tokens={"tok"}
    ) as server:
        status, answer, headers = call(server, "GET", "/")
        assert status == 401
        assert answer["error"]["type"] == "security_exception"
        assert "missing authentication credentials" in answer["error"]["reason"]
        assert headers["WWW-Authenticate"].startswith("Basic")
        for good in (
            urllib3.make_headers(basic_auth="elastic:pw"),
            {"Authorization": f"ApiKey {key}"},
            {"Authorization": "Bearer tok"},
        ):
            assert call(server, "GET", "/", headers=good)[0] == 200
        for bad in (
            urllib3.make_headers(basic_auth="elastic:wrong"),
            {"Authorization": "ApiKey " + base64.b64encode(b"key-id:nope").decode()},
            {"Authorization": "Bearer nope"},
        ):
            status, answer, _ = call(server, "GET", "/", headers=bad)
            assert status == 401
            assert "unable to authenticate" in answer["error"]["reason"]


# --- Solr ----------------------------------------------------------------------------------------


def test_solr_adds_deletes_and_commits(solr):
    commands = (
        b'{"add":{"doc":{"id":"a","title":"A"}},"add":{"doc":{"id":"b"}},'
        b'"delete":{"id":"a"},"add":{"doc":{"id":"c"}},"delete":["c"]}'
    )
    status, answer, _ = call(solr, "POST", "/nutch/update", commands, JSON)
    assert (status, answer["responseHeader"]["status"]) == (200, 0)
    assert solr.documents("nutch") == {"b": {"id": "b"}}
    assert call(solr, "GET", "/nutch/select?q=*:*")[1]["response"]["numFound"] == 0
    call(solr, "POST", "/nutch/update?commit=true", b'[{"id":"d","url":"d"}]', JSON)
    assert call(solr, "GET", "/nutch/select?q=*:*")[1]["response"]["numFound"] == 2
    call(solr, "POST", "/nutch/update", b'{"delete":{"query":"*:*"},"commit":{}}', JSON)
    assert solr.documents("nutch", visible=True) == {}


def test_solr_stops_at_a_bad_document_keeping_those_before(solr):
    body = b'[{"id":"a"},{"title":"no id"},{"id":"c"}]'
    status, answer, _ = call(solr, "POST", "/nutch/update", body, JSON)
    assert status == 400
    assert answer["error"] == {
        "metadata": ["error-class", "org.apache.solr.common.SolrException"],
        "msg": "Document is missing mandatory uniqueKey field: id",
        "code": 400,
    }
    assert list(solr.documents("nutch")) == ["a"]
    status, answer, _ = call(solr, "POST", "/nutch/update", b'[{"id":"x","bogus":1}]', JSON)
    assert (status, answer["error"]["msg"]) == (400, "ERROR: [doc=x] unknown field 'bogus'")


def test_solr_tolerant_chain_lists_the_failed_commands():
    with SearchServer("solr", fields={"id"}, solr_tolerant=True) as server:
        body = b'[{"id":"a"},{"id":"b","bogus":1},{"id":"c"}]'
        status, answer, _ = call(server, "POST", "/nutch/update", body, JSON)
        assert status == 200
        assert answer["responseHeader"]["errors"] == [
            {"type": "ADD", "id": "b", "message": "ERROR: [doc=b] unknown field 'bogus'"}
        ]
        server.fail_half(1)
        body = b'[{"id":"d"},{"id":"e"},{"id":"f"},{"id":"g"}]'
        _, answer, _ = call(server, "POST", "/nutch/update", body, JSON)
        assert [e["id"] for e in answer["responseHeader"]["errors"]] == ["e", "g"]
        assert sorted(server.documents("nutch")) == ["a", "c", "d", "f"]


def test_solr_fail_half_without_a_tolerant_chain_applies_half_then_503(solr):
    solr.fail_half(1)
    status, answer, _ = call(solr, "POST", "/nutch/update", b'[{"id":"a"},{"id":"b"}]', JSON)
    assert (status, answer["error"]["code"]) == (503, 503)
    assert list(solr.documents("nutch")) == ["a"]


def test_solr_authentication_and_content_type():
    with SearchServer("solr", users={"solr": "SolrRocks"}) as server:
        status, answer, headers = call(server, "POST", "/c/update", b"[]", JSON)
        assert (status, answer["error"]["msg"]) == (401, "require authentication")
        assert headers["WWW-Authenticate"] == 'Basic realm="solr"'
        auth = urllib3.make_headers(basic_auth="solr:SolrRocks")
        assert call(server, "POST", "/c/update", b"[]", {**JSON, **auth})[0] == 200
        text = {"Content-Type": "text/plain", **auth}
        assert call(server, "POST", "/c/update", b"[]", text)[0] == 415
