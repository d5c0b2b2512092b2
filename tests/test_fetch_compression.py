"""nutchy.compression: bodies decoded up to a bound whatever the coding, a body that does not
decode handed on flagged, and Scrapy's own behaviour for the requests that are not the fetch's."""

from __future__ import annotations

import gzip
import sys
import zlib

import brotli
import pytest
from scrapy import Request
from scrapy.http import HtmlResponse, Response
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.test import get_crawler

from nutchy.compression import (
    DECODED_TRUNCATED,
    META_DECODE_ERROR,
    META_DECODED_LIMIT,
    UNDECODABLE,
    DecodeError,
    NutchHttpCompressionMiddleware,
    decode_body,
)
from nutchy.core.fetch import RETRY_AFTER_MAX, parse_retry_after

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

TEXT = b"<html><title>t</title>" + b"0123456789" * 1000 + b"</html>"

ENCODERS = {
    b"gzip": gzip.compress,
    b"deflate": zlib.compress,
    b"br": brotli.compress,
    b"zstd": zstd.compress,
}


def _raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


@pytest.mark.parametrize("coding", list(ENCODERS))
@pytest.mark.parametrize("limit", [-1, 0, 1, 100, len(TEXT) - 1, len(TEXT), len(TEXT) + 1])
def test_each_coding_decodes_up_to_the_limit_and_says_whether_it_cut(coding, limit):
    body, left, truncated = decode_body(ENCODERS[coding](TEXT), [coding], limit)
    expected = TEXT if limit < 0 else TEXT[:limit]
    assert (body, left, truncated) == (expected, [], 0 <= limit < len(TEXT))


@pytest.mark.parametrize(
    ("body", "codings"),
    [
        (gzip.compress(gzip.compress(TEXT)), [b"gzip", b"gzip"]),  # two headers
        (gzip.compress(gzip.compress(TEXT)), [b"gzip,gzip"]),
        (zstd.compress(gzip.compress(TEXT)), [b"gzip, zstd"]),
        (gzip.compress(TEXT[:100]) + gzip.compress(TEXT[100:]), [b"x-gzip"]),  # two members
        (zstd.compress(TEXT[:100]) + zstd.compress(TEXT[100:]), [b"zstd"]),  # two frames
        (_raw_deflate(TEXT), [b"deflate"]),  # raw deflate, as some servers send it
        (gzip.compress(TEXT) + b"\0\0\0\0", [b"gzip"]),  # padding after the member
        (gzip.compress(TEXT), [b" GZIP ", b"identity"]),
    ],
)
def test_several_codings_members_frames_and_spellings(body, codings):
    assert decode_body(body, codings, -1) == (TEXT, [], False)


@pytest.mark.parametrize("coding", list(ENCODERS))
def test_a_stream_cut_short_gives_what_it_holds(coding):
    # what a body cut at the content limit looks like
    encoded = ENCODERS[coding](bytes(range(256)) * 400)
    body, _, truncated = decode_body(encoded[: len(encoded) // 2], [coding], -1)
    assert (bytes(range(256)) * 400).startswith(body)
    assert not truncated


def test_a_bomb_costs_the_limit():
    bomb = gzip.compress(b"\0" * (1 << 20), 9) * 256  # 256 MiB in 256 members
    body, _, truncated = decode_body(gzip.compress(bomb), [b"gzip, gzip"], 4096)
    assert (len(body), truncated) == (4096, True)


@pytest.mark.parametrize(
    ("body", "coding"),
    [(TEXT, b"gzip"), (TEXT, b"zstd"), (TEXT, b"deflate"), (b"\x1f\x8b\x08\x00" + TEXT, b"gzip")],
)
def test_a_body_that_does_not_decode_is_an_error_naming_the_coding(body, coding):
    with pytest.raises(DecodeError, match=f"^{coding.decode()}: "):
        decode_body(body, [coding], -1)


def test_an_unknown_coding_stops_decoding_and_stays_listed():
    body = gzip.compress(TEXT)
    assert decode_body(body, [b"gzip, x-evil"], -1) == (body, [b"gzip", b"x-evil"], False)
    assert decode_body(body, [b"x-evil, gzip"], -1) == (TEXT, [b"x-evil"], False)


def _middleware() -> NutchHttpCompressionMiddleware:
    return build_from_crawler(NutchHttpCompressionMiddleware, get_crawler())


def _response(request: Request, body: bytes, coding: bytes, status: int = 200) -> Response:
    headers = {"Content-Type": "text/html", "Content-Encoding": coding}
    return HtmlResponse(request.url, status=status, headers=headers, body=body, request=request)


def test_the_middleware_bounds_the_fetch_requests_and_flags_the_cut():
    request = Request("http://a.example/", meta={META_DECODED_LIMIT: 100})
    response = _middleware().process_response(
        request, _response(request, gzip.compress(TEXT), b"gzip")
    )
    assert isinstance(response, HtmlResponse)
    assert response.body == TEXT[:100]
    assert DECODED_TRUNCATED in response.flags
    assert b"Content-Encoding" not in response.headers
    assert response.text.startswith("<html><title>t</title>")


def test_the_middleware_hands_on_a_body_that_does_not_decode_flagged_and_empty():
    request = Request("http://a.example/", meta={META_DECODED_LIMIT: -1})
    response = _middleware().process_response(request, _response(request, TEXT, b"gzip", 404))
    assert isinstance(response, Response)
    assert (response.status, response.body) == (404, b"")
    assert UNDECODABLE in response.flags
    assert request.meta[META_DECODE_ERROR].startswith("gzip: ")


def test_other_requests_get_scrapys_behaviour():
    request = Request("http://a.example/")
    response = _middleware().process_response(
        request, _response(request, gzip.compress(TEXT), b"gzip")
    )
    assert isinstance(response, Response)
    assert response.body == TEXT
    with pytest.raises(OSError):  # Scrapy's own error for a plain body
        _middleware().process_response(request, _response(request, TEXT, b"gzip"))


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("²", None),
        ("١٢٠", None),
        ("12a", None),
        ("-5", None),
        ("1.5", None),
        ("", None),
        ("\x00", None),
        ("9" * 5000, RETRY_AFTER_MAX),
        ("9" * 12, RETRY_AFTER_MAX),
        ("Fri, 14 Jul 99999 02:40:30 GMT", None),
        ("Fri, 14 Jul 2017 02:40:30", None),
        ("Mon, 32 Foo 2017 99:99:99 GMT", None),
        ("120", 120.0),
    ],
)
def test_any_retry_after_is_read_without_raising(value, seconds):
    assert parse_retry_after(value, 0) == seconds
