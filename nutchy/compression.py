"""Content-Encoding for the fetch: a body is decoded up to a bound and never beyond, and a body
that does not decode is an answer like any other, not an exception.

:class:`NutchHttpCompressionMiddleware` takes the place of Scrapy's ``HttpCompressionMiddleware``
(order 590) when the add-on is on. For the requests of rows and of robots.txt, which carry their
bound in ``meta["nutch_decoded_limit"]`` (``http.content.limit`` for a page,
``NUTCH_HTTP_ROBOTS_MAX_SIZE`` for robots.txt), it decodes the ``gzip``, ``deflate``, ``br`` and
``zstd`` codings one chunk at a time and stops at the bound: a decompression bomb (a few hundred
bytes of brotli that decode to a gibibyte) costs the bound and no more, and the decoded start of
the body is kept and flagged :data:`DECODED_TRUNCATED`, as Nutch keeps the first
``http.content.limit`` bytes of a body it unzips. Scrapy's own middleware raises past
``DOWNLOAD_MAXSIZE`` instead and drops the whole body, where a long page served with gzip should
keep its first part as an uncompressed one does.

A body that does not decode (``Content-Encoding: gzip`` on a plain body, an invalid stream) is
handed on empty and flagged :data:`UNDECODABLE`, with the reason in ``meta["nutch_decode_error"]``,
for :class:`~nutchy.middlewares.NutchFetchMiddleware` to record (Nutch's fetch fails the same
way: an exception status, retried later). A coding nutchy does not know stays in the
``Content-Encoding`` header with the body as it came, as in Scrapy.

Every other request gets Scrapy's behaviour unchanged.
"""

from __future__ import annotations

import sys
import zlib
from functools import partial
from itertools import chain
from typing import TYPE_CHECKING, Any, Final, Protocol

from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.http import TextResponse
from scrapy.responsetypes import responsetypes

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from scrapy import Request
    from scrapy.http import Response

__all__ = [
    "DECODED_TRUNCATED",
    "META_DECODED_LIMIT",
    "META_DECODE_ERROR",
    "UNDECODABLE",
    "DecodeError",
    "NutchHttpCompressionMiddleware",
    "decode_body",
]

#: Request meta: the most bytes a body is decoded to (-1: no bound); requests without it get
#: Scrapy's own decoding.
META_DECODED_LIMIT: Final = "nutch_decoded_limit"
#: Request meta: why the body could not be decoded (with :data:`UNDECODABLE`).
META_DECODE_ERROR: Final = "nutch_decode_error"
#: Response flag: the decoded body was cut at the bound.
DECODED_TRUNCATED: Final = "nutch_decoded_truncated"
#: Response flag: the body could not be decoded; the response's body is empty.
UNDECODABLE: Final = "nutch_undecodable"


class DecodeError(ValueError):
    """A body that does not decode with the coding its ``Content-Encoding`` names."""


class _Stream(Protocol):
    def __call__(self, data: bytes, room: int) -> tuple[bytes, bool]: ...


def decode_body(
    body: bytes, codings: Iterable[bytes], limit: int
) -> tuple[bytes, list[bytes], bool]:
    """Decode *body* through the content *codings* (``Content-Encoding`` values, applied in the
    order listed, so undone from the last), producing at most *limit* bytes (-1: no bound).

    Returns the body, the codings left on it (an unknown coding and every one before it), and
    whether the body was cut at *limit*. A stream cut short (a body truncated at the content
    limit) gives what it holds; :exc:`DecodeError` when a coding's data is invalid from the start.

    >>> import gzip
    >>> decode_body(gzip.compress(b"x" * 100), [b"gzip"], 10)
    (b'xxxxxxxxxx', [], True)
    >>> decode_body(gzip.compress(b"abc"), [b"x-evil, GZIP"], -1)
    (b'abc', [b'x-evil'], False)
    >>> decode_body(b"plain", [b"gzip"], -1)
    Traceback (most recent call last):
    ...
    nutchy.compression.DecodeError: gzip: Error -3 while decompressing data: incorrect header check
    """
    listed = [
        coding.strip().lower()
        for coding in chain.from_iterable(value.split(b",") for value in codings)
    ]
    left = [coding for coding in listed if coding and coding != b"identity"]
    truncated = False
    while left and left[-1] in _DECODERS:
        coding = left.pop()
        try:
            body, cut = _decode(_DECODERS[coding](), body, limit)
        except Exception as exc:
            raise DecodeError(f"{coding.decode('ascii')}: {exc}") from exc
        truncated = truncated or cut
    return body, left, truncated


def _decode(stream: _Stream, data: bytes, limit: int) -> tuple[bytes, bool]:
    """Run *stream* over *data* until it ends, its output passes *limit*, or it stops giving."""
    out = bytearray()
    empty = 0
    while True:
        # One byte more than the room left tells a body that ends at the bound from a longer one.
        room = min(limit - len(out) + 1, _CHUNK) if limit >= 0 else _CHUNK
        chunk, more = stream(data, room)
        data = b""
        out += chunk
        if 0 <= limit < len(out):
            del out[limit:]
            return bytes(out), True
        empty = 0 if chunk else empty + 1
        if not more or empty > 1:
            return bytes(out), False


_CHUNK: Final = 1 << 16


class _Frames:
    """A decompressor of zlib's or zstd's kind (``decompress(data, max_length)``, ``eof``,
    ``unused_data``) over one frame, or over several in a row with *frames* (gzip members)."""

    def __init__(self, make: Callable[[], Any], *, frames: bool) -> None:
        self.make = make
        self.frames = frames
        self.d = make()
        self.started = False
        self.next_input = b""

    def __call__(self, data: bytes, room: int) -> tuple[bytes, bool]:
        d = self.d
        data = data or self.next_input or getattr(d, "unconsumed_tail", b"")
        self.next_input = b""
        try:
            chunk: bytes = d.decompress(data, room)
        except Exception:
            if not self.started:
                raise
            return b"", False  # garbage after a complete frame: what came before is the body
        self.started = True
        if d.eof:
            rest: bytes = d.unused_data
            if self.frames and rest.strip(b"\0"):
                self.d = self.make()
                self.next_input = rest
                return chunk, True
            return chunk, False
        # zlib keeps the input it could not use yet; zstd says whether it needs more input.
        return chunk, bool(getattr(d, "unconsumed_tail", b"")) or not getattr(
            d, "needs_input", True
        )


def _gzip() -> _Stream:
    return _Frames(partial(zlib.decompressobj, 16 + zlib.MAX_WBITS), frames=True)


def _deflate() -> _Stream:
    """zlib-wrapped deflate, or raw deflate (which some servers send as ``deflate``)."""
    streams: list[_Stream] = []

    def step(data: bytes, room: int) -> tuple[bytes, bool]:
        if streams:
            return streams[0](data, room)
        wrapped = _Frames(zlib.decompressobj, frames=False)
        try:
            result = wrapped(data, room)
        except zlib.error:
            streams.append(_Frames(partial(zlib.decompressobj, -zlib.MAX_WBITS), frames=False))
            return streams[0](data, room)
        streams.append(wrapped)
        return result

    return step


def _brotli() -> _Stream:
    import brotli  # type: ignore[import-untyped]

    d = brotli.Decompressor()

    def step(data: bytes, room: int) -> tuple[bytes, bool]:
        chunk: bytes = d.process(data, output_buffer_limit=room)
        return chunk, not d.is_finished()

    return step


def _zstd() -> _Stream:
    if sys.version_info >= (3, 14):
        from compression import zstd
    else:
        from backports import zstd

    return _Frames(zstd.ZstdDecompressor, frames=True)


_DECODERS: Final[dict[bytes, Callable[[], _Stream]]] = {
    b"gzip": _gzip,
    b"x-gzip": _gzip,
    b"deflate": _deflate,
    b"br": _brotli,
    b"zstd": _zstd,
}


class NutchHttpCompressionMiddleware(HttpCompressionMiddleware):
    """Scrapy's ``HttpCompressionMiddleware``, with bounded decoding for the fetch's requests
    (see the module docstring)."""

    def process_response(  # type: ignore[override]
        self, request: Request, response: Response
    ) -> Request | Response:
        limit = request.meta.get(META_DECODED_LIMIT)
        codings = response.headers.getlist("Content-Encoding")
        if limit is None:
            return super().process_response(request, response)
        if not codings or request.method == "HEAD":
            return response
        try:
            body, left, truncated = decode_body(response.body, codings, limit)
        except DecodeError as exc:
            request.meta[META_DECODE_ERROR] = str(exc)
            return response.replace(body=b"", flags=[*response.flags, UNDECODABLE])
        headers = response.headers.copy()
        if left:
            headers[b"Content-Encoding"] = b", ".join(left)
        else:
            del headers[b"Content-Encoding"]
        flags = [*response.flags, DECODED_TRUNCATED] if truncated else response.flags
        cls = responsetypes.from_args(headers=headers, url=response.url, body=body)
        if issubclass(cls, TextResponse):
            # The encoding is found again from the decoded body, as Scrapy's middleware does.
            return response.replace(cls=cls, body=body, headers=headers, flags=flags, encoding=None)
        return response.replace(cls=cls, body=body, headers=headers, flags=flags)
