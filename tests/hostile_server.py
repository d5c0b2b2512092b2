"""A hostile web server for tests: an asyncio server on loopback addresses that misbehaves the way
the open web does, one misbehaviour per path, written byte by byte on the socket.

:class:`HostileServer` listens on each of several loopback addresses (one host each, each on its
own port) in a thread of its own, and records every request line it reads. Paths:

- ``/ok``: a small HTML page; ``/robots.txt``: the host's entry in ``robots`` (a
  :class:`Raw` answer, or the path of a misbehaviour below), else 404;
- ``/raw/<name>``: the :class:`Raw` answer registered under *name* (``server.raw[name]``): any
  status line, headers and body bytes, for encodings, bombs, Retry-After values, lying
  Content-Types and charsets, redirects;
- ``/length/long``: ``Content-Length: 100000`` and 10 bytes, then the connection closes;
  ``/length/short``: ``Content-Length: 5`` and 1,000 bytes;
- ``/chunked/endless``: chunks of 4 KiB for as long as the client reads;
- ``/slowloris``: the status line, then a header byte every 0.2 s, forever;
- ``/silent``: reads the request and never answers;
- ``/reset``: the connection is reset (RST) without an answer;
- ``/headers/many``: 10,000 headers; ``/headers/huge``: one header of 1 MiB;
- ``/status/garbage``: a status line that is not HTTP; ``/status/none``: a body with no status
  line;
- ``/1xx``: 1,000 ``100 Continue`` answers, then a page.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Self

PAGE = b"<html><head><title>ok</title></head><body><a href='/ok'>ok</a></body></html>"


@dataclass(frozen=True)
class Raw:
    """An answer written as given: *status* line (without CRLF), *headers* and *body*."""

    status: bytes = b"HTTP/1.1 200 OK"
    headers: Sequence[tuple[bytes, bytes]] = ()
    body: bytes = b""
    #: whether to add a Content-Length header of the body
    length: bool = True

    def encode(self) -> bytes:
        lines = [self.status, *(name + b": " + value for name, value in self.headers)]
        if self.length:
            lines.append(b"Content-Length: " + str(len(self.body)).encode())
        lines.append(b"Connection: close")
        return b"\r\n".join(lines) + b"\r\n\r\n" + self.body


def html(body: bytes = PAGE, *headers: tuple[bytes, bytes], status: bytes = b"200 OK") -> Raw:
    """A :class:`Raw` answer of *status* with ``Content-Type: text/html`` and *headers*."""
    return Raw(b"HTTP/1.1 " + status, [(b"Content-Type", b"text/html"), *headers], body)


@dataclass
class HostileServer:
    """The server (see the module docstring) on *hosts*, loopback addresses."""

    hosts: Sequence[str]
    raw: dict[str, Raw] = field(default_factory=dict)
    #: host -> its robots.txt: a :class:`Raw` answer, or the path of a misbehaviour
    robots: dict[str, Raw | str] = field(default_factory=dict)
    #: (host, request line) of every request read
    requests: list[tuple[str, str]] = field(default_factory=list)
    #: (host, path, seconds) of every connection that ended: from the request read to the
    #: connection closed, by either side
    durations: list[tuple[str, str, float]] = field(default_factory=list)
    ports: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._servers: list[asyncio.Server] = []

    def __enter__(self) -> Self:
        self._thread.start()
        for host in self.hosts:
            server = asyncio.run_coroutine_threadsafe(self._start(host), self._loop).result(10)
            self._servers.append(server)
            self.ports[host] = server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc_info: object) -> None:
        async def stop() -> None:
            for server in self._servers:
                server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def url(self, host: str, path: str) -> str:
        return f"http://{host}:{self.ports[host]}{path}"

    def count(self, host: str, path: str) -> int:
        """How many requests *host* received for *path*."""
        return sum(1 for h, line in self.requests if h == host and line.split(" ")[1:2] == [path])

    async def _start(self, host: str) -> asyncio.Server:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            started = [0.0, ""]
            try:
                await self._answer(host, reader, writer, started)
            except (
                ConnectionError,
                asyncio.IncompleteReadError,
                asyncio.LimitOverrunError,
                asyncio.CancelledError,
            ):
                pass
            finally:
                with contextlib.suppress(Exception):
                    writer.close()
                if started[0]:
                    seconds = time.monotonic() - float(started[0])
                    self.durations.append((host, str(started[1]), seconds))

        return await asyncio.start_server(handle, host, 0, limit=1 << 20)

    async def _answer(
        self,
        host: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        started: list[float | str],
    ) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        self.requests.append((host, line))
        path = line.split(" ")[1].split("?")[0] if line.count(" ") >= 2 else "/"
        started[:] = [time.monotonic(), path]
        answer: Raw | str
        if path == "/robots.txt":
            answer = self.robots.get(host, Raw(b"HTTP/1.1 404 Not Found", body=b"no"))
        elif path.startswith("/raw/"):
            answer = self.raw[path[len("/raw/") :]]
        elif path == "/ok":
            answer = html()
        else:
            answer = path
        if isinstance(answer, Raw):
            writer.write(answer.encode())
        else:
            # Until it is done, or the client goes away.
            misbehave = asyncio.ensure_future(_MISBEHAVIOURS[answer](writer))
            gone = asyncio.ensure_future(reader.read())
            await asyncio.wait((misbehave, gone), return_when=asyncio.FIRST_COMPLETED)
            for task in (misbehave, gone):
                task.cancel()
            if misbehave.done() and not misbehave.cancelled() and misbehave.exception():
                return
        await writer.drain()


async def _length_long(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n")
    writer.write(b"<html>cut!")


async def _length_short(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\n")
    writer.write(b"<html>" + b"x" * 1000)


async def _chunked_endless(writer: asyncio.StreamWriter) -> None:
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"%x\r\n%s\r\n" % (4096, b"a" * 4096)
    while True:
        writer.write(chunk)
        await writer.drain()
        await asyncio.sleep(0.001)


async def _slowloris(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    while True:
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.write(b"z")


async def _silent(writer: asyncio.StreamWriter) -> None:
    await asyncio.sleep(3600)


async def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _headers_many(writer: asyncio.StreamWriter) -> None:
    headers = b"".join(b"X-H%d: %d\r\n" % (i, i) for i in range(10_000))
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n" + headers)
    writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(PAGE), PAGE))


async def _headers_huge(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Huge: " + b"h" * (1 << 20))
    writer.write(b"\r\nContent-Length: %d\r\n\r\n%s" % (len(PAGE), PAGE))


async def _status_garbage(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 abc what\r\nContent-Length: 2\r\n\r\nok")


async def _status_none(writer: asyncio.StreamWriter) -> None:
    writer.write(PAGE)


async def _informational(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 100 Continue\r\n\r\n" * 1000)
    writer.write(html().encode())


_MISBEHAVIOURS = {
    "/length/long": _length_long,
    "/length/short": _length_short,
    "/chunked/endless": _chunked_endless,
    "/slowloris": _slowloris,
    "/silent": _silent,
    "/reset": _reset,
    "/headers/many": _headers_many,
    "/headers/huge": _headers_huge,
    "/status/garbage": _status_garbage,
    "/status/none": _status_none,
    "/1xx": _informational,
}
