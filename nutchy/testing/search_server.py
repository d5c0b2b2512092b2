"""A wire-level test server for the HTTP index writers: Elasticsearch's and OpenSearch's bulk API,
and Solr's JSON update API, on 127.0.0.1.

No Elasticsearch, OpenSearch or Solr can run where nutchy is tested, so the writers of
:mod:`nutchy.index.servers` talk to this server over real HTTP, through their own HTTP client. It
implements the documented request and response formats of the calls the writers make, keeps the
documents in memory, and rejects what a real server rejects, with the bodies a real server sends:

- **Elasticsearch 8.x** (``flavor="elasticsearch"``) and **OpenSearch 2.x**
  (``flavor="opensearch"``, the same bulk API): ``GET /`` (the version banner, which says which
  of the two it is), ``POST /_bulk`` and ``POST /{index}/_bulk`` (NDJSON: ``index``, ``create``
  and ``delete`` actions, each ``index``/``create`` line followed by its source; the body must end
  with a newline; the response's ``errors`` flag and one item per action with its ``status``, a
  ``result`` or an ``error`` with ``type`` and ``reason``; a delete of an unknown id is a 404 item
  with ``result: not_found`` and no error), ``POST /{index}/_refresh``, ``GET /{index}/_count``
  (what a search sees: the documents of the last refresh) and ``POST /{index}/_delete_by_query``
  (``match_all`` only). Whole requests fail as the servers fail them: 401 ``security_exception``
  (with ``WWW-Authenticate``), 406 for a content type they do not take, 413 over
  ``max_content_length``, 400 ``illegal_argument_exception`` for a malformed body, 404
  ``index_not_found_exception``.
- **Solr 9.x** (``flavor="solr"``): ``POST /solr/{collection}/update`` with a JSON body: an array
  of documents, or an object of commands (``add`` with ``doc``, ``delete`` by ``id``, list of ids
  or ``query`` ``*:*``, ``commit``), repeated keys allowed, in order, as Solr reads them; the
  ``commit`` and ``softCommit`` parameters; ``GET /solr/{collection}/select``
  with ``q=*:*`` (``numFound`` of the committed documents); the response's ``responseHeader``,
  and errors as ``{"responseHeader": ..., "error": {"msg": ..., "code": ...}}``. A document
  without ``id`` (the uniqueKey) or with a field outside ``fields`` (when given: a schema
  without a catch-all dynamic field) fails the request at that document, the documents before
  it applied, as Solr's update chain does. Elasticsearch and OpenSearch with ``fields`` have
  a strict mapping: a source with another field is a 400 item
  (``strict_dynamic_mapping_exception``). With ``solr_tolerant``, the collection's update chain
  has ``TolerantUpdateProcessorFactory``: such documents are skipped and listed in
  ``responseHeader.errors`` (``type``, ``id``, ``message``) with status 0.

Authentication, when configured: HTTP Basic (``users``), Elasticsearch's and OpenSearch's
``Authorization: ApiKey base64(id:key)`` (``api_keys``), and ``Authorization: Bearer TOKEN``
(``tokens``; Elasticsearch's service tokens, Solr's JWT plugin). A request without valid
credentials gets 401.

Knobs that make it fail as a loaded cluster does, for the writers' retries:

- :meth:`SearchServer.fail_half` makes the next *n* bulk (or Solr update) requests fail every
  second action: Elasticsearch/OpenSearch answer those items 429
  ``es_rejected_execution_exception`` (``errors: true``, the others applied); Solr with
  ``solr_tolerant`` lists them in ``responseHeader.errors``; Solr without it applies the first
  half and answers 503, as a node going away in the middle of a request does.
- :meth:`SearchServer.reject` makes the next *n* requests fail whole with a status (429 with a
  ``Retry-After``, 503...) before anything is applied.

Every request is recorded (:attr:`SearchServer.requests`: method, path, query, headers and
body), so a test can check what a retry sent again. Where it differs from the real servers
(docs/testing.md): one node, no shards or replicas, no mappings (sources are stored as sent), no
search beyond counting, versions and sequence numbers counted per document only.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Self

__all__ = ["FLAVORS", "Recorded", "SearchServer"]

FLAVORS = ("elasticsearch", "opensearch", "solr")
#: The versions the server's banner gives, those the writers are written for.
VERSIONS = {"elasticsearch": "8.15.0", "opensearch": "2.17.0", "solr": "9.7.0"}

_JSON_TYPES = ("application/json", "application/x-ndjson")


@dataclass(frozen=True)
class Recorded:
    """One request the server received."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes


@dataclass
class _Index:
    """An Elasticsearch/OpenSearch index, or a Solr collection: documents by id, with what the
    last refresh (commit) made visible."""

    docs: dict[str, dict[str, Any]] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    visible: dict[str, dict[str, Any]] = field(default_factory=dict)
    seq_no: int = 0

    def refresh(self) -> None:
        self.visible = dict(self.docs)


class _Reply(Exception):
    """A whole request's answer, raised from deep inside its handling."""

    def __init__(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers or {}


class SearchServer:
    """The server, of one *flavor* (see the module docstring), on 127.0.0.1 and a free port
    unless *port* is given. Use it as a context manager, or call :meth:`start` and
    :meth:`stop`."""

    def __init__(
        self,
        flavor: str = "elasticsearch",
        *,
        port: int = 0,
        users: dict[str, str] | None = None,
        api_keys: dict[str, str] | None = None,
        tokens: Iterable[str] = (),
        max_content_length: int = 100 * 2**20,
        fields: Iterable[str] | None = None,
        solr_tolerant: bool = False,
    ) -> None:
        if flavor not in FLAVORS:
            raise ValueError(f"'flavor' must be one of {FLAVORS}, got {flavor!r}")
        self.flavor = flavor
        self.users = dict(users or {})
        self.api_keys = dict(api_keys or {})
        self.tokens = frozenset(tokens)
        self.max_content_length = max_content_length
        self.fields = None if fields is None else frozenset(fields)
        self.solr_tolerant = solr_tolerant
        self.requests: list[Recorded] = []
        self._indices: dict[str, _Index] = {}
        self._lock = threading.Lock()
        self._fail_half = 0
        self._rejections: list[tuple[int, dict[str, str]]] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.search = self  # type: ignore[attr-defined]
        self.port: int = self._httpd.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL: ``http://127.0.0.1:PORT``, plus ``/solr`` for Solr."""
        base = f"http://127.0.0.1:{self.port}"
        return base + "/solr" if self.flavor == "solr" else base

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- knobs and views for tests -------------------------------------------------------------

    def fail_half(self, requests: int = 1) -> None:
        """Fail every second action of the next *requests* bulk or update requests."""
        with self._lock:
            self._fail_half = requests

    def reject(self, requests: int = 1, status: int = 429, retry_after: int | None = 1) -> None:
        """Answer the next *requests* requests with *status* as a whole, applying nothing
        (with a ``Retry-After`` of *retry_after* seconds, when not ``None``)."""
        headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
        with self._lock:
            self._rejections.extend([(status, headers)] * requests)

    def documents(self, index: str, *, visible: bool = False) -> dict[str, dict[str, Any]]:
        """The documents of *index* (a Solr collection) by id; with *visible*, those a search
        sees: as of the last refresh (commit)."""
        with self._lock:
            found = self._indices.get(index)
            if found is None:
                return {}
            return dict(found.visible if visible else found.docs)

    def clear(self) -> None:
        """Forget every index, the recorded requests and the knobs."""
        with self._lock:
            self._indices.clear()
            self.requests.clear()
            self._fail_half = 0
            self._rejections.clear()

    # --- handling ------------------------------------------------------------------------------

    def handle(self, request: Recorded) -> tuple[int, Any, dict[str, str]]:
        """The status, JSON body and headers of the answer to *request*."""
        with self._lock:
            self.requests.append(request)
            try:
                self._authenticate(request)
                if self._rejections:
                    status, headers = self._rejections.pop(0)
                    raise _Reply(status, self._whole_error(status), headers)
                if self.flavor == "solr":
                    return self._solr(request)
                return self._elastic(request)
            except _Reply as reply:
                return reply.status, reply.body, reply.headers

    def _whole_error(self, status: int, reason: str = "") -> Any:
        if self.flavor == "solr":
            msg = reason or {429: "Too Many Requests", 503: "Service Unavailable"}.get(
                status, "Server Error"
            )
            return _solr_error(status, msg)
        kind = {429: "es_rejected_execution_exception", 503: "unavailable_shards_exception"}
        reason = reason or f"rejected by the test server with status {status}"
        return _es_error(status, kind.get(status, "exception"), reason)

    def _authenticate(self, request: Recorded) -> None:
        if not (self.users or self.api_keys or self.tokens):
            return
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        scheme = scheme.lower()
        if scheme == "basic" and self.users:
            user, _, password = _b64(value).partition(":")
            if user in self.users and self.users[user] == password:
                return
        elif scheme == "apikey" and self.api_keys and self.flavor != "solr":
            key_id, _, key = _b64(value).partition(":")
            if key_id in self.api_keys and self.api_keys[key_id] == key:
                return
        elif scheme == "bearer" and self.tokens and value in self.tokens:
            return
        if self.flavor == "solr":
            raise _Reply(
                401,
                _solr_error(401, "require authentication"),
                {"WWW-Authenticate": 'Basic realm="solr"'},
            )
        reason = (
            f"missing authentication credentials for REST request [{request.path}]"
            if not header
            else f"unable to authenticate with provided credentials for REST request [{request.path}]"
        )
        body = _es_error(401, "security_exception", reason)
        raise _Reply(401, body, {"WWW-Authenticate": 'Basic realm="security" charset="UTF-8"'})

    def _check_body(self, request: Recorded) -> None:
        if len(request.body) > self.max_content_length:
            if self.flavor == "solr":
                raise _Reply(413, _solr_error(413, "Request Entity Too Large"))
            raise _Reply(413, {"error": "Request Entity Too Large", "status": 413})
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if request.method == "POST" and content_type not in _JSON_TYPES:
            if self.flavor == "solr":
                raise _Reply(
                    415, _solr_error(415, f"Unsupported ContentType: {content_type or 'none'}")
                )
            raise _Reply(
                406,
                {
                    "error": f"Content-Type header [{content_type}] is not supported",
                    "status": 406,
                },
            )

    # --- Elasticsearch and OpenSearch ----------------------------------------------------------

    def _elastic(self, request: Recorded) -> tuple[int, Any, dict[str, str]]:
        parts = [p for p in request.path.split("/") if p]
        headers = {"X-Elastic-Product": "Elasticsearch"} if self.flavor == "elasticsearch" else {}
        if request.method == "GET" and not parts:
            return 200, self._banner(), headers
        if request.method in ("POST", "PUT") and parts and parts[-1] == "_bulk" and len(parts) <= 2:
            self._check_body(request)
            return 200, self._bulk(request, parts[0] if len(parts) == 2 else None), headers
        actions = ("_refresh", "_count", "_delete_by_query")
        if len(parts) == 2 and not parts[0].startswith("_") and parts[1] in actions:
            name, action = parts
            index = self._indices.get(name)
            if index is None:
                raise _Reply(404, _missing_index(name))
            if action == "_refresh" and request.method in ("POST", "GET"):
                index.refresh()
                shards = {"total": 1, "successful": 1, "failed": 0}
                return 200, {"_shards": shards}, headers
            if action == "_count" and request.method in ("GET", "POST"):
                return 200, {"count": len(index.visible)}, headers
            if action == "_delete_by_query" and request.method == "POST":
                self._check_body(request)
                query = _json(request.body, self.flavor).get("query")
                if query != {"match_all": {}}:
                    raise _Reply(400, self._whole_error(400, "only match_all is implemented"))
                deleted = len(index.docs)
                index.docs.clear()
                if request.query.get("refresh") == ["true"]:
                    index.refresh()
                return 200, {"took": 1, "timed_out": False, "deleted": deleted}, headers
        reason = f"no handler found for uri [{request.path}] and method [{request.method}]"
        raise _Reply(400, self._whole_error(400, reason))

    def _banner(self) -> dict[str, Any]:
        version: dict[str, Any] = {"number": VERSIONS[self.flavor], "build_type": "tar"}
        if self.flavor == "opensearch":
            version["distribution"] = "opensearch"
            tagline = "The OpenSearch Project: https://opensearch.org/"
        else:
            version["build_flavor"] = "default"
            tagline = "You Know, for Search"
        return {
            "name": "nutchy-test",
            "cluster_name": "nutchy-test",
            "version": version,
            "tagline": tagline,
        }

    def _bulk(self, request: Recorded, path_index: str | None) -> dict[str, Any]:
        if request.body and not request.body.endswith(b"\n"):
            raise _Reply(
                400,
                self._whole_error(400, "The bulk request must be terminated by a newline [\\n]"),
            )
        lines = request.body.split(b"\n")[:-1]
        actions: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
        i = 0
        while i < len(lines):
            if not lines[i].strip():
                i += 1
                continue
            action = _json(lines[i], self.flavor)
            if not isinstance(action, dict) or len(action) != 1:
                raise _Reply(400, self._whole_error(400, "Malformed action/metadata line"))
            ((name, meta),) = action.items()
            if name not in ("index", "create", "delete") or not isinstance(meta, dict):
                raise _Reply(
                    400, self._whole_error(400, f"Malformed action/metadata line [{i + 1}]")
                )
            source = None
            if name != "delete":
                i += 1
                if i >= len(lines):
                    raise _Reply(400, self._whole_error(400, "Malformed bulk: no source"))
                source = _json(lines[i], self.flavor)
            if not (meta.get("_index") or path_index):
                raise _Reply(400, self._whole_error(400, "Validation Failed: 1: index is missing;"))
            actions.append((name, meta, source))
            i += 1
        failing = self._fail_half > 0
        if failing:
            self._fail_half -= 1
        items = []
        for position, (name, meta, source) in enumerate(actions):
            index_name = str(meta.get("_index") or path_index)
            if failing and position % 2 == 1:
                items.append({name: _rejected_item(index_name, meta.get("_id"))})
                continue
            items.append({name: self._apply_action(name, index_name, meta, source)})
        if request.query.get("refresh") in (["true"], ["wait_for"], [""]):
            for name in {str(m.get("_index") or path_index) for _, m, _ in actions}:
                self._indices.setdefault(name, _Index()).refresh()
        errors = any("error" in next(iter(item.values())) for item in items)
        return {"took": 1, "errors": errors, "items": items}

    def _apply_action(
        self, name: str, index_name: str, meta: dict[str, Any], source: Any
    ) -> dict[str, Any]:
        index = self._indices.setdefault(index_name, _Index())
        doc_id = meta.get("_id")
        if name == "delete":
            if doc_id is None:
                return _item_error(
                    index_name,
                    None,
                    400,
                    "action_request_validation_exception",
                    "Validation Failed: 1: id is missing;",
                )
            found = index.docs.pop(str(doc_id), None) is not None
            result = ("deleted", 200) if found else ("not_found", 404)
            return _done(index, index_name, str(doc_id), *result)
        if not isinstance(source, dict):
            return _item_error(
                index_name,
                doc_id,
                400,
                "mapper_parsing_exception",
                "failed to parse: the source is not a JSON object",
            )
        if doc_id is None:
            doc_id = f"auto-{index.seq_no}"
        key = str(doc_id)
        if name == "create" and key in index.docs:
            return _item_error(
                index_name,
                key,
                409,
                "version_conflict_engine_exception",
                f"[{key}]: version conflict, document already exists",
            )
        unknown = [] if self.fields is None else [f for f in source if f not in self.fields]
        if unknown:
            return _item_error(
                index_name,
                key,
                400,
                "strict_dynamic_mapping_exception",
                f"[1:2] mapping set to strict, dynamic introduction of [{unknown[0]}] within"
                " [_doc] is not allowed",
            )
        created = key not in index.docs
        index.docs[key] = source
        return _done(index, index_name, key, *(("created", 201) if created else ("updated", 200)))

    # --- Solr ----------------------------------------------------------------------------------

    def _solr(self, request: Recorded) -> tuple[int, Any, dict[str, str]]:
        parts = [p for p in request.path.split("/") if p]
        if len(parts) != 3 or parts[0] != "solr":
            raise _Reply(404, _solr_error(404, f"no such path: {request.path}"))
        _, name, handler = parts
        if handler == "select" and request.method == "GET":
            collection = self._indices.setdefault(name, _Index())
            if request.query.get("q") not in (["*:*"], None):
                raise _Reply(400, _solr_error(400, "only q=*:* is implemented"))
            return (
                200,
                {
                    "responseHeader": _header(),
                    "response": {"numFound": len(collection.visible), "start": 0, "docs": []},
                },
                {},
            )
        if handler != "update" or request.method != "POST":
            raise _Reply(404, _solr_error(404, f"no such handler: {request.method} /{handler}"))
        self._check_body(request)
        collection = self._indices.setdefault(name, _Index())
        try:
            parsed = json.loads(request.body, object_pairs_hook=_Pairs)
        except (ValueError, UnicodeDecodeError) as exc:
            raise _Reply(400, _solr_error(400, f"Cannot parse provided JSON: {exc}")) from None
        commands = _solr_commands(parsed)
        failing = self._fail_half > 0
        if failing:
            self._fail_half -= 1
        header = _header()
        errors: list[dict[str, str]] = []
        commit = request.query.get("commit") == ["true"] or request.query.get("softCommit") == [
            "true"
        ]
        for position, (command, value) in enumerate(commands):
            if failing and position % 2 == 1:
                if not self.solr_tolerant:
                    raise _Reply(503, _solr_error(503, "No registered leader was found"))
                errors.append(_tolerated(command, value, "Service Unavailable: no leader"))
                continue
            try:
                if command == "commit":
                    commit = True
                else:
                    self._solr_apply(collection, command, value)
            except _Reply as reply:
                if not self.solr_tolerant:
                    raise
                errors.append(_tolerated(command, value, reply.body["error"]["msg"]))
        if commit:
            collection.refresh()
        if self.solr_tolerant:
            header["errors"] = errors
            header["maxErrors"] = -1
        return 200, {"responseHeader": header}, {}

    def _solr_apply(self, collection: _Index, command: str, value: Any) -> None:
        if command == "add":
            doc = value
            doc_id = doc.get("id")
            if doc_id is None:
                raise _Reply(
                    400, _solr_error(400, "Document is missing mandatory uniqueKey field: id")
                )
            if self.fields is not None:
                for name in doc:
                    if name not in self.fields:
                        raise _Reply(
                            400, _solr_error(400, f"ERROR: [doc={doc_id}] unknown field '{name}'")
                        )
            collection.docs[str(doc_id)] = doc
        elif command == "delete_id":
            collection.docs.pop(str(value), None)
        elif command == "delete_query":
            if value != "*:*":
                raise _Reply(400, _solr_error(400, "only the query *:* is implemented"))
            collection.docs.clear()


# --- helpers ---------------------------------------------------------------------------------


def _b64(value: str) -> str:
    try:
        return base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return ""


def _json(data: bytes, flavor: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        reason = f"Failed to parse JSON: {exc}"
        if flavor == "solr":
            raise _Reply(400, _solr_error(400, reason)) from None
        raise _Reply(400, _es_error(400, "x_content_parse_exception", reason)) from None


def _es_error(status: int, error_type: str, reason: str, **more: str) -> dict[str, Any]:
    """An Elasticsearch/OpenSearch error answer: the error, once as its own root cause."""
    error = {"type": error_type, "reason": reason, **more}
    return {"error": {"root_cause": [error], **error}, "status": status}


def _missing_index(name: str) -> dict[str, Any]:
    return _es_error(404, "index_not_found_exception", f"no such index [{name}]", index=name)


def _done(index: _Index, name: str, key: str, result: str, status: int) -> dict[str, Any]:
    """The item of an action done on document *key* of *index*: its new version and seq_no."""
    index.seq_no += 1
    version = index.versions[key] = index.versions.get(key, 0) + 1
    return {
        "_index": name,
        "_id": key,
        "_version": version,
        "result": result,
        "_shards": {"total": 1, "successful": 1, "failed": 0},
        "_seq_no": index.seq_no - 1,
        "_primary_term": 1,
        "status": status,
    }


def _item_error(
    index: str, doc_id: Any, status: int, error_type: str, reason: str
) -> dict[str, Any]:
    item: dict[str, Any] = {"_index": index, "status": status}
    if doc_id is not None:
        item["_id"] = str(doc_id)
    item["error"] = {"type": error_type, "reason": reason}
    return item


def _rejected_item(index: str, doc_id: Any) -> dict[str, Any]:
    return _item_error(
        index,
        doc_id,
        429,
        "es_rejected_execution_exception",
        "rejected execution of coordinating operation (test server: fail_half)",
    )


def _header() -> dict[str, Any]:
    return {"status": 0, "QTime": 1}


def _solr_error(code: int, msg: str) -> dict[str, Any]:
    return {
        "responseHeader": {"status": code, "QTime": 1},
        "error": {
            "metadata": ["error-class", "org.apache.solr.common.SolrException"],
            "msg": msg,
            "code": code,
        },
    }


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as Solr reads it: its keys in order, repeated keys kept."""


def _solr_commands(parsed: Any) -> list[tuple[str, Any]]:
    """The commands of a Solr JSON update body (its objects read as :class:`_Pairs`), in
    order: ``add`` (a document as a dict), ``delete_id``, ``delete_query``, ``commit``."""
    if isinstance(parsed, list) and not isinstance(parsed, _Pairs):
        return [("add", _solr_doc(doc)) for doc in parsed]
    if not isinstance(parsed, _Pairs):
        raise _Reply(400, _solr_error(400, "Unknown command: expected an object or an array"))
    commands: list[tuple[str, Any]] = []
    for name, value in parsed:
        if name == "add":
            pairs = dict(value) if isinstance(value, _Pairs) else {}
            if "doc" not in pairs:
                raise _Reply(400, _solr_error(400, "Missing doc in add command"))
            commands.append(("add", _solr_doc(pairs["doc"])))
        elif name == "delete":
            if isinstance(value, _Pairs):
                pairs = dict(value)
                if "id" in pairs:
                    commands.append(("delete_id", pairs["id"]))
                elif "query" in pairs:
                    commands.append(("delete_query", pairs["query"]))
                else:
                    raise _Reply(400, _solr_error(400, "Missing id or query in delete command"))
            elif isinstance(value, list):
                commands.extend(("delete_id", v) for v in value)
            else:
                commands.append(("delete_id", value))
        elif name == "commit":
            commands.append(("commit", None))
        else:
            raise _Reply(400, _solr_error(400, f"Unknown command '{name}'"))
    return commands


def _solr_doc(pairs: Any) -> dict[str, Any]:
    if not isinstance(pairs, _Pairs):
        raise _Reply(400, _solr_error(400, "a document must be a JSON object"))
    return dict(pairs)


def _tolerated(command: str, value: Any, message: str) -> dict[str, str]:
    if command == "add":
        return {"type": "ADD", "id": str(value.get("id")), "message": message}
    if command == "delete_query":
        return {"type": "DELQ", "id": str(value), "message": message}
    return {"type": "DELID", "id": str(value), "message": message}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def _serve(self) -> None:
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = Recorded(
            self.command,
            split.path,
            parse_qs(split.query, keep_blank_values=True),
            {k.lower(): v for k, v in self.headers.items()},
            body,
        )
        server: SearchServer = self.server.search  # type: ignore[attr-defined]
        status, payload, headers = server.handle(request)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = _serve
