"""The README's first command crawls ``urls/seed.txt`` on this repository's ``docs/`` served by
``python -m http.server 8000 --directory docs``: every example seed is a page of that site."""

from __future__ import annotations

import functools
import threading
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def test_the_readme_serves_docs_on_port_8000_and_crawls_the_example_seeds():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = next(line for line in readme.splitlines() if "nutchy crawl" in line)
    assert "http.server 8000 --bind 127.0.0.1 --directory docs" in first
    assert "nutchy crawl urls/seed.txt" in first


def test_every_example_seed_is_a_page_of_the_served_docs():
    lines = (ROOT / "urls" / "seed.txt").read_text(encoding="utf-8").splitlines()
    seeds = [line.split("\t")[0] for line in lines if line.strip() and not line.startswith("#")]
    assert len(seeds) >= 2
    handler = functools.partial(_Quiet, directory=str(ROOT / "docs"))
    with ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            for seed in seeds:
                parts = urlsplit(seed)
                assert (parts.hostname, parts.port) == ("127.0.0.1", 8000), seed
                url = f"http://127.0.0.1:{server.server_address[1]}{parts.path}"
                with urllib.request.urlopen(url, timeout=5) as response:
                    assert response.status == 200, seed
        finally:
            server.shutdown()
