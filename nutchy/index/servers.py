"""Index writers for search servers: Elasticsearch and OpenSearch (bulk API), Solr (JSON update
API), over HTTP with urllib3 (docs/index.md, "Elasticsearch, OpenSearch and Solr").

They keep the contract of :class:`~nutchy.index.writers.IndexWriter`: documents and deletions
are buffered, at most one action per URL (the last one asked for), and sent in requests of at
most *max_docs* actions and *max_bytes* bytes of body, when the buffer holds that much and at
:meth:`commit`, which then makes them visible (a refresh, a Solr commit).

Failures:

- a request that fails whole (the server unreachable, a timeout, 429 or any 5xx) is sent again
  after an exponential backoff: *backoff* seconds, doubled each time, at most 60 s, or the
  ``Retry-After`` the server asked for (at most 60 s), *retries* times at most;
- a bulk whose answer says that some actions failed (Elasticsearch's ``errors: true`` with 429
  or 5xx items; Solr's ``responseHeader.errors`` of a collection with a tolerant update chain)
  is sent again with only those actions, under the same backoff;
- anything else (401, a document the server refuses: a 4xx item, a Solr 400) is an
  :exc:`~nutchy.exceptions.IndexWriterError` naming the writer, its URL and the server's reason,
  once the rest of the buffer was sent. So is an action still failing after *retries*.

:meth:`close` sends what is still buffered without committing it (a job run without commits),
unless a request failed before.

Authentication: HTTP Basic (*username* and *password*), an Elasticsearch/OpenSearch API key
(*api_key*: the ``encoded`` value Elasticsearch returns, or ``id:key``), or a bearer token
(*bearer_token*); at most one. *verify* is the TLS check of ``https`` URLs: ``True`` (the
system's certificate authorities), ``False``, or the path of a CA bundle.
"""

from __future__ import annotations

import base64
import email.utils
import json
import logging
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Final

import urllib3

from nutchy.exceptions import ConfigError, IndexWriterError
from nutchy.index.writers import BaseIndexWriter

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Self

    from scrapy.settings import BaseSettings

    from nutchy.index.document import Document

__all__ = ["ElasticsearchIndexWriter", "OpenSearchIndexWriter", "SolrIndexWriter"]

logger = logging.getLogger(__name__)

#: The longest pause between two attempts, in seconds, whatever the backoff or Retry-After say.
MAX_PAUSE: Final = 60.0
#: Failures shown in an error's message at most.
_SHOWN: Final = 3

#: A buffered action: ``("index", source bytes)`` or ``("delete", None)``, by document id.
_Action = tuple[str, bytes | None]


class _Transient(Exception):
    """A request that may succeed if sent again; *retry_after* is what the server asked for."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


class _ServerIndexWriter(BaseIndexWriter):
    """What the server writers share: the buffer, the HTTP pool, authentication and retries."""

    #: The name of the settings' prefix (``NUTCH_ELASTIC``, ``NUTCH_SOLR``).
    prefix: str = ""

    def __init__(
        self,
        url: str,
        *,
        username: str = "",
        password: str = "",
        api_key: str = "",
        bearer_token: str = "",
        verify: bool | str = True,
        timeout: float = 30.0,
        max_docs: int = 250,
        max_bytes: int = 2_500_500,
        backoff: float = 0.1,
        retries: int = 10,
    ) -> None:
        setting = f"{self.prefix}_{self._url_setting}"
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"{setting} must start with http:// or https://, got {url!r}")
        if urllib3.util.parse_url(url).auth:
            raise ConfigError(
                f"{setting} holds credentials: give them in {self.prefix}_AUTH_USERNAME and"
                f" {self.prefix}_AUTH_PASSWORD, which are never printed"
            )
        if sum(map(bool, (username or password, api_key, bearer_token))) > 1:
            raise ConfigError(
                f"{type(self).__name__}: give a username and password, an API key or a bearer"
                " token, not several"
            )
        for name, value in (("max_docs", max_docs), ("max_bytes", max_bytes)):
            if value < 1:
                raise ConfigError(f"{type(self).__name__}: {name} must be >= 1, got {value!r}")
        if retries < 0 or backoff < 0 or timeout <= 0:
            raise ConfigError(
                f"{type(self).__name__}: retries and backoff must be >= 0 and timeout > 0"
            )
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.max_docs = max_docs
        self.max_bytes = max_bytes
        self.backoff = backoff
        self.retries = retries
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if username or password:
            self.headers.update(urllib3.make_headers(basic_auth=f"{username}:{password}"))
        elif api_key:
            encoded = _b64(api_key) if ":" in api_key else api_key
            self.headers["Authorization"] = f"ApiKey {encoded}"
        elif bearer_token:
            self.headers["Authorization"] = f"Bearer {bearer_token}"
        pool: dict[str, Any] = {"retries": False, "timeout": urllib3.Timeout(timeout)}
        if verify is False:
            pool["cert_reqs"] = "CERT_NONE"
        else:
            pool["cert_reqs"] = "CERT_REQUIRED"
            if isinstance(verify, str):
                pool["ca_certs"] = verify
        self._http = urllib3.PoolManager(num_pools=2, maxsize=2, **pool)
        self._pending: OrderedDict[str, _Action] = OrderedDict()
        self._pending_bytes = 0
        self._failed = False
        #: Requests sent, and actions sent again after a failure (for the job's summary).
        self.requests = 0
        self.resent = 0

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> Self:
        p = cls.prefix

        def text(name: str) -> str:
            value = settings.get(f"{p}_{name}")
            return "" if value is None else str(value)

        def number(name: str, kind: type[int | float]) -> Any:
            value = settings.get(f"{p}_{name}")
            try:
                return kind(value)
            except (TypeError, ValueError):
                raise ConfigError(f"{p}_{name} must be a number, got {value!r}") from None

        verify: bool | str = settings.get(f"{p}_TLS_VERIFY")
        if isinstance(verify, str) and verify.lower() in ("true", "false", "1", "0"):
            verify = verify.lower() in ("true", "1")
        return cls(
            text(cls._url_setting),
            username=text("AUTH_USERNAME"),
            password=text("AUTH_PASSWORD"),
            api_key=text("API_KEY") if cls.prefix == "NUTCH_ELASTIC" else "",
            bearer_token=text("BEARER_TOKEN"),
            verify=verify,
            timeout=number("TIMEOUT", float),
            max_docs=number(cls._docs_setting, int),
            max_bytes=number("MAX_BULK_SIZE", int),
            backoff=number("EXPONENTIAL_BACKOFF_MILLIS", float) / 1000,
            retries=number("EXPONENTIAL_BACKOFF_RETRIES", int),
            **cls._extra_settings(settings),
        )

    _url_setting = "URL"
    _docs_setting = "MAX_BULK_DOCS"

    @classmethod
    def _extra_settings(cls, settings: BaseSettings) -> dict[str, Any]:
        return {}

    def describe(self) -> str:
        return f"{type(self).__name__} ({self.url})"

    # --- the buffer ----------------------------------------------------------------------------

    def write(self, docs: Sequence[Document]) -> None:
        for doc in docs:
            fields = {k: v for k, v in doc.fields().items() if v is not None}
            source = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
            self._add(doc.id, ("index", source.encode()))

    def delete(self, urls: Sequence[str]) -> None:
        for url in urls:
            self._add(url, ("delete", None))

    def _add(self, doc_id: str, action: _Action) -> None:
        old = self._pending.pop(doc_id, None)
        if old is not None:
            self._pending_bytes -= self._size(doc_id, old)
        self._pending[doc_id] = action
        self._pending_bytes += self._size(doc_id, action)
        if len(self._pending) >= self.max_docs or self._pending_bytes >= self.max_bytes:
            self._flush()

    def _size(self, doc_id: str, action: _Action) -> int:
        return len(doc_id) + 40 + (0 if action[1] is None else len(action[1]))

    def _flush(self) -> None:
        """Send the buffer in requests of at most *max_docs* actions and *max_bytes* bytes."""
        try:
            self._send_pending()
        except IndexWriterError:
            self._failed = True
            raise

    def _send_pending(self) -> None:
        refused: list[str] = []
        while self._pending:
            batch: list[tuple[str, _Action]] = []
            size = 0
            while self._pending and len(batch) < self.max_docs:
                doc_id, action = next(iter(self._pending.items()))
                cost = self._size(doc_id, action)
                if batch and size + cost > self.max_bytes:
                    break
                del self._pending[doc_id]
                self._pending_bytes -= cost
                batch.append((doc_id, action))
                size += cost
            refused += self._send_batch(batch)
        if refused:
            more = f" (and {len(refused) - _SHOWN} more)" if len(refused) > _SHOWN else ""
            raise IndexWriterError(
                f"{self.describe()}: {len(refused)} actions refused: "
                + "; ".join(refused[:_SHOWN])
                + more
            )

    def _send_batch(self, batch: list[tuple[str, _Action]]) -> list[str]:
        """Send *batch*, again and again for the actions that failed for a while; return the
        reasons of the actions the server refused for good."""
        refused: list[str] = []
        attempt = 0
        while True:
            try:
                failed, refusals = self._bulk(batch)
            except _Transient as exc:
                failed, refusals, retry_after, reason = batch, [], exc.retry_after, str(exc)
            else:
                retry_after, reason = None, f"{len(failed)} actions rejected"
            refused += refusals
            if not failed:
                return refused
            if attempt >= self.retries:
                raise IndexWriterError(
                    f"{self.describe()}: gave up after {attempt + 1} attempts: {reason}"
                )
            self.resent += len(failed)
            self._pause(attempt, retry_after, reason)
            attempt += 1
            batch = failed

    def _retrying(self, call: Callable[[], tuple[int, Any]]) -> tuple[int, Any]:
        """*call*, again after a backoff while it fails for a while (see the module docstring)."""
        attempt = 0
        while True:
            try:
                return call()
            except _Transient as exc:
                if attempt >= self.retries:
                    raise IndexWriterError(
                        f"{self.describe()}: gave up after {attempt + 1} attempts: {exc}"
                    ) from exc
                self._pause(attempt, exc.retry_after, str(exc))
                attempt += 1

    def _pause(self, attempt: int, retry_after: float | None, reason: str) -> None:
        delay = min(MAX_PAUSE, self.backoff * 2**attempt)
        if retry_after is not None:
            delay = min(MAX_PAUSE, max(delay, retry_after))
        logger.warning("%s: %s; again in %.3g s", self.describe(), reason, delay)
        time.sleep(delay)

    # --- HTTP ----------------------------------------------------------------------------------

    def _call(
        self, method: str, path: str, body: bytes | None = None, *, content_type: str = ""
    ) -> tuple[int, Any]:
        """One request: its status and JSON answer. A transient failure raises
        :exc:`_Transient`; a 4xx other than 429 raises :exc:`IndexWriterError`, except 404,
        returned for the caller to judge."""
        headers = dict(self.headers)
        if content_type:
            headers["Content-Type"] = content_type
        self.requests += 1
        try:
            response = self._http.request(
                method, self.url + path, body=body, headers=headers, redirect=False
            )
        except urllib3.exceptions.HTTPError as exc:
            raise _Transient(f"{method} {path}: {exc}") from exc
        try:
            answer = json.loads(response.data) if response.data else None
        except ValueError:
            answer = response.data[:200].decode("utf-8", "replace")
        status = response.status
        if status == 429 or status >= 500:
            raise _Transient(
                f"{method} {path}: {status} {_reason(answer)}",
                _retry_after(response.headers.get("Retry-After")),
            )
        if status >= 400 and status != 404:
            raise IndexWriterError(
                f"{self.describe()}: {method} {path}: {status} {_reason(answer)}"
            )
        return status, answer

    def _bulk(
        self, batch: list[tuple[str, _Action]]
    ) -> tuple[list[tuple[str, _Action]], list[str]]:
        """Send *batch* once: the actions that failed for a while, and the reasons of those
        refused for good."""
        raise NotImplementedError

    def commit(self) -> None:
        self._flush()
        self._make_visible()

    def _make_visible(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Send what is still buffered, without committing it (``nutchy clean -noCommit``; the
        server makes it visible at its next refresh or commit), unless a request of this
        writer failed already; then release the connections."""
        try:
            if self._pending and not self._failed:
                self._flush()
        finally:
            self._pending.clear()
            self._pending_bytes = 0
            self._http.clear()


class ElasticsearchIndexWriter(_ServerIndexWriter):
    """Writes to an Elasticsearch 8.x index (``NUTCH_ELASTIC_URL``, ``NUTCH_ELASTIC_INDEX``)
    with the bulk API: an ``index`` action per document (its id the URL, its source the
    document's fields), a ``delete`` per deletion; :meth:`commit` refreshes the index. At open,
    ``GET /`` must name the product and major version the writer is for."""

    prefix = "NUTCH_ELASTIC"
    product = "Elasticsearch"
    majors: tuple[int, ...] = (8, 9)

    def __init__(self, url: str, *, index: str = "nutch", **options: Any) -> None:
        super().__init__(url, **options)
        if not index or index != index.lower() or any(c in index for c in '/\\*?"<>| ,#'):
            raise ConfigError(f"{self.prefix}_INDEX is not a valid index name: {index!r}")
        self.index = index

    @classmethod
    def _extra_settings(cls, settings: BaseSettings) -> dict[str, Any]:
        return {"index": str(settings.get(f"{cls.prefix}_INDEX") or "")}

    def describe(self) -> str:
        return f"{type(self).__name__} ({self.url}/{self.index})"

    def open(self, *, rebuild: bool = False) -> None:
        _, banner = self._retrying(lambda: self._call("GET", "/"))
        version = (banner or {}).get("version", {}) if isinstance(banner, dict) else {}
        product = "OpenSearch" if version.get("distribution") == "opensearch" else "Elasticsearch"
        number = str(version.get("number", "?"))
        major = int(number.split(".")[0]) if number.split(".")[0].isdigit() else -1
        if product != self.product or major not in self.majors:
            wanted = " or ".join(f"{m}.x" for m in self.majors)
            other = (
                "OpenSearchIndexWriter" if product == "OpenSearch" else "ElasticsearchIndexWriter"
            )
            hint = f" (use nutchy.index.servers.{other})" if product != self.product else ""
            raise IndexWriterError(
                f"{self.describe()}: the server is {product} {number}; this writer is for"
                f" {self.product} {wanted}{hint}"
            )
        if rebuild:
            body = json.dumps({"query": {"match_all": {}}}).encode()
            self._retrying(
                lambda: self._call("POST", f"/{self.index}/_delete_by_query?refresh=true", body)
            )

    def _bulk(
        self, batch: list[tuple[str, _Action]]
    ) -> tuple[list[tuple[str, _Action]], list[str]]:
        lines: list[bytes] = []
        for doc_id, (kind, source) in batch:
            lines.append(json.dumps({kind: {"_id": doc_id}}, ensure_ascii=False).encode())
            if source is not None:
                lines.append(source)
        body = b"\n".join(lines) + b"\n"
        status, answer = self._call(
            "POST", f"/{self.index}/_bulk", body, content_type="application/x-ndjson"
        )
        items = answer.get("items") if isinstance(answer, dict) else None
        if status != 200 or not isinstance(items, list) or len(items) != len(batch):
            raise IndexWriterError(
                f"{self.describe()}: unexpected answer to a bulk of {len(batch)}: {status}"
                f" {_reason(answer)}"
            )
        failed: list[tuple[str, _Action]] = []
        refused: list[str] = []
        for action, item in zip(batch, items, strict=True):
            result: Any = next(iter(item.values()), {}) if isinstance(item, dict) else {}
            if not isinstance(result, dict) or "error" not in result:
                continue  # done, or a delete of an id the index does not hold (404 not_found)
            code = int(result.get("status", 500))
            if code == 429 or code >= 500:
                failed.append(action)
            else:
                refused.append(f"{action[1][0]} {action[0]}: {_reason(result)}")
        return failed, refused

    def _make_visible(self) -> None:
        self._retrying(lambda: self._call("POST", f"/{self.index}/_refresh"))


class OpenSearchIndexWriter(ElasticsearchIndexWriter):
    """Writes to an OpenSearch 2.x index: the same bulk API and settings as
    :class:`ElasticsearchIndexWriter` (``NUTCH_ELASTIC_*``); ``GET /`` must say OpenSearch."""

    product = "OpenSearch"
    majors = (2, 3)


class SolrIndexWriter(_ServerIndexWriter):
    """Writes to a Solr 9.x collection (``NUTCH_SOLR_SERVER_URL``, such as
    ``http://localhost:8983/solr/nutch``) with the JSON update API: one request of ``add`` and
    ``delete`` commands, in order, per batch; :meth:`commit` sends a ``commit``. A collection
    whose update chain has ``TolerantUpdateProcessorFactory`` answers which commands failed,
    and only those are sent again; without it, a request that fails is sent again whole (adds
    and deletes by id are idempotent)."""

    prefix = "NUTCH_SOLR"
    _url_setting = "SERVER_URL"
    _docs_setting = "COMMIT_SIZE"

    def open(self, *, rebuild: bool = False) -> None:
        if rebuild:
            self._send_batch([("*:*", ("delete_query", None))])
            self._make_visible()

    def _bulk(
        self, batch: list[tuple[str, _Action]]
    ) -> tuple[list[tuple[str, _Action]], list[str]]:
        parts: list[bytes] = []
        for doc_id, (kind, source) in batch:
            if kind == "index":
                assert source is not None
                parts.append(b'"add":{"doc":' + source + b"}")
            elif kind == "delete":
                parts.append(b'"delete":{"id":' + json.dumps(doc_id).encode() + b"}")
            else:
                parts.append(b'"delete":{"query":' + json.dumps(doc_id).encode() + b"}")
        body = b"{" + b",".join(parts) + b"}"
        status, answer = self._call("POST", "/update?wt=json", body)
        if status == 404:
            raise IndexWriterError(f"{self.describe()}: no such collection: {_reason(answer)}")
        header = answer.get("responseHeader", {}) if isinstance(answer, dict) else {}
        errors = header.get("errors") or []
        if not errors:
            return [], []
        failed_ids = {str(e.get("id")) for e in errors if isinstance(e, dict)}
        failed = [a for a in batch if a[0] in failed_ids]
        return failed, []

    def _make_visible(self) -> None:
        self._retrying(lambda: self._call("POST", "/update?wt=json", b'{"commit":{}}'))


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def _reason(answer: Any) -> str:
    """The server's reason in an error answer, as short as it says it."""
    if isinstance(answer, dict):
        error = answer.get("error")
        if isinstance(error, dict):
            if "msg" in error:  # Solr
                return str(error["msg"])
            text = f"{error.get('type', 'error')}: {error.get('reason', '')}"
            return text.strip(": ")
        if error is not None:
            return str(error)
        return json.dumps(answer)[:200]
    return str(answer)[:200] if answer else ""


def _retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (a number, or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())
