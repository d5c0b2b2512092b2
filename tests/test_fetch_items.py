"""What a project gets of ``scrapy crawl nutch``: a :class:`~nutchy.items.PageItem` for each page
fetched with success, in its own item pipelines and in Scrapy's feed exports (``-O x.jsonl``,
``-O x.csv``, ``-O x.xml``), written by Scrapy's own exporters.

Real crawls (``scrapy crawl nutch`` in a subprocess) of a loopback site; every expectation comes
from the site, from what its servers answered, or from the row the crawl wrote.
"""

from __future__ import annotations

import base64
import csv
import json
import subprocess
import time
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path

import pytest
from graph_site import Binary, GraphSite, Page, Redirect, Refresh, Resource, Status
from sites import FetchProject, parse_stats, prepare_batch

from nutchy.core.urls import reverse_url
from nutchy.core.webpage import WebPage
from nutchy.items import PageContentItem, PageItem, fetch_time_iso

H2, H3 = "127.0.0.2", "127.0.0.3"

#: A project's own pipelines: one before nutchy's parse pipeline (100), one after it. Each
#: records what it receives, one JSON line per item, in ``<ITEMTEST_RECORD>.<class name>``.
PIPELINES = """
import json

from itemadapter import ItemAdapter


class Recorder:
    def __init__(self, path):
        self.path = path

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings["ITEMTEST_RECORD"] + "." + cls.__name__)

    def process_item(self, item):
        kind = type(item)
        record = {"type": f"{kind.__module__}.{kind.__qualname__}", **ItemAdapter(item).asdict()}
        record.pop("content", None)  # FetchedPage's bytes
        record.pop("headers", None)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\\n")
        return item


class Before(Recorder):
    pass


class After(Recorder):
    pass
"""


@pytest.fixture
def store_factory(embedded_store_factory):
    """Crawl mechanics, not storage: the embedded store."""
    return embedded_store_factory


def crawl(project: FetchProject, *args: str) -> tuple[int, str]:
    """``scrapy crawl nutch -a batch=b1`` in *project* with more command-line *args*."""
    done = subprocess.run(
        [*project.command("b1", {}, {}), *args],
        cwd=project.root,
        env=project.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stderr


def serve(site: GraphSite, resources: dict[str, Resource]) -> dict[str, str]:
    """Put *resources* (path on a host → resource) on *site*; their URLs by that path."""
    urls = {}
    for where, resource in resources.items():
        host, path = where.split(" ")
        url = site.url(host, path)
        site.put(url, resource)
        urls[where] = url
    return urls


def load_jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow  # 4-5 s on a loaded machine: a crawl of ten URLs on two hosts, three feeds
def test_feed_exports_and_a_project_pipeline(store, tmp_path):
    robots = {H3: "User-agent: *\nDisallow: /private\n"}
    with GraphSite((H2, H3), robots=robots) as site:
        a, comma, three = site.url(H2, "/a"), site.url(H2, "/b?x=1,2"), site.url(H3, "/")
        urls = serve(
            site,
            {
                # text and anchors with commas, quotes, a newline and non-ASCII letters
                f"{H2} /": Page(links=(a, comma, three), title='Home, "quoted",\nline two'),
                f"{H2} /a": Page(title="A"),
                f"{H2} /b?x=1,2": Page(links=(a,), title="B, with a comma"),
                f"{H2} /refresh": Refresh(to=a),
                f"{H2} /img": Binary(),
                f"{H2} /gone": Status(404),
                f"{H2} /moved": Redirect(301, a),
                f"{H2} /same": Page(title="same"),
                f"{H3} /": Page(title="three"),
                f"{H3} /private/x": Page(title="denied"),
            },
        )
        table = prepare_batch(store, list(urls.values()))
        # /same was fetched before with this ETag: it answers 304, which makes no item
        table.put(WebPage(reverse_url(urls[f"{H2} /same"]), headers={"ETag": '"v1"'}), ["headers"])
        (tmp_path / "itemtest_pipelines.py").write_text(PIPELINES, encoding="utf-8")
        record = tmp_path / "record"
        project = FetchProject(
            tmp_path,
            store,
            ITEM_PIPELINES={"itemtest_pipelines.Before": 50, "itemtest_pipelines.After": 300},
            ITEMTEST_RECORD=str(record),
        )
        returncode, log = crawl(project, "-O", "pages.jsonl", "-O", "pages.csv", "-O", "pages.xml")
        answered = {e.url: e.status for e in site.exchanges()}
    assert returncode == 0, log[-3000:]
    assert "Traceback" not in log and "TypeError" not in log and " ERROR: " not in log, log
    # Every page answered 200 is one item; nothing else is (404, 301, 304, robots.txt denial).
    fetched = sorted(url for url, status in answered.items() if status == 200)
    assert answered[urls[f"{H2} /same"]] == 304
    assert urls[f"{H3} /private/x"] not in answered
    assert len(fetched) == 6
    assert parse_stats(log)["item_scraped_count"] == len(fetched)

    # JSON lines: the declared fields (the content only with its setting), as the table has them
    items = load_jsonl(tmp_path / "pages.jsonl")
    assert sorted(str(item["url"]) for item in items) == fetched
    by_url = {str(item["url"]): item for item in items}
    for url, item in by_url.items():
        assert set(item) <= set(PageItem.fields)
        row = table.get(url)
        assert row is not None
        assert item["status"] == "status_fetched"
        assert item["http_status"] == 200
        assert item["batch_id"] == "b1"
        assert item["truncated"] is False
        assert item["fetch_time"] == fetch_time_iso(row.fetch_time)
        assert datetime.fromisoformat(str(item["fetch_time"])).timestamp() * 1000 == pytest.approx(
            time.time() * 1000, abs=60_000
        )
        assert item["content_type"] == row.content_type
        assert item["score"] == pytest.approx(row.score)
        assert item.get("signature") == (row.signature.hex() if row.signature else None)
        assert item.get("title") == row.title
        assert item.get("text") == row.text
        outlinks = [{"url": u, "anchor": text} for u, text in row.outlinks.items()]
        assert item.get("outlinks", []) == outlinks
    home = by_url[urls[f"{H2} /"]]
    assert home["parse_status"] == "success_ok"
    assert '"quoted", line two' in str(home["title"])  # the CSV cells below need quoting
    assert {link["url"] for link in home["outlinks"]} == {a, comma, three}  # type: ignore[union-attr]
    assert by_url[urls[f"{H2} /refresh"]]["parse_status"] == "success_redirect"
    assert by_url[urls[f"{H2} /img"]]["parse_status"] == "notparsed"
    assert by_url[urls[f"{H2} /img"]]["content_type"] == "application/octet-stream"

    # CSV: the declared fields as header, one row per item, the outlinks as JSON in their cell
    with (tmp_path / "pages.csv").open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = [dict(zip(header, row, strict=True)) for row in reader]
    assert header == list(PageItem.fields)
    assert sorted(row["url"] for row in rows) == fetched
    for row in rows:
        item = by_url[row["url"]]
        assert row["title"] == item.get("title", "")
        assert row["text"] == item.get("text", "")
        assert row["http_status"] == "200"
        assert row["score"] == str(item["score"])
        assert (json.loads(row["outlinks"]) if row["outlinks"] else []) == item.get("outlinks", [])
        assert not any(cell.startswith(("b'", "[{'")) for cell in row.values()), row

    # XML: one <item> per page, the outlinks as <value> elements of url and anchor
    root = ET.parse(tmp_path / "pages.xml").getroot()
    xml_items = {el.findtext("url"): el for el in root.iter("item")}
    assert sorted(xml_items) == fetched
    for url, el in xml_items.items():
        item = by_url[url]
        assert el.findtext("title") == item.get("title")
        assert el.findtext("http_status") == "200"
        links = [
            {"url": value.findtext("url"), "anchor": value.findtext("anchor") or ""}
            for value in el.iterfind("outlinks/value")
        ]
        assert links == item.get("outlinks", [])

    # The project's pipelines: before nutchy's parse pipeline the fetched page, after it the item
    before = load_jsonl(Path(f"{record}.Before"))
    after = load_jsonl(Path(f"{record}.After"))
    assert {r["type"] for r in before} == {"nutchy.pipelines.FetchedPage"}
    assert {r["type"] for r in after} == {"nutchy.items.PageItem"}
    assert sorted(str(r["url"]) for r in before) == sorted(str(r["url"]) for r in after) == fetched
    assert {str(r["url"]): {k: v for k, v in r.items() if k != "type"} for r in after} == by_url


def test_the_content_with_its_setting(store, tmp_path):
    with GraphSite((H2,)) as site:
        urls = serve(site, {f"{H2} /": Page(title="Café, home"), f"{H2} /img": Binary()})
        prepare_batch(store, list(urls.values()))
        project = FetchProject(tmp_path, store, NUTCH_ITEM_CONTENT=True)
        returncode, log = crawl(project, "-O", "pages.jsonl", "-O", "pages.csv")
    assert returncode == 0, log[-3000:]
    assert "Traceback" not in log and " ERROR: " not in log, log
    items = {str(item["url"]): item for item in load_jsonl(tmp_path / "pages.jsonl")}
    assert sorted(items) == sorted(urls.values())
    home, image = items[urls[f"{H2} /"]], items[urls[f"{H2} /img"]]
    assert home["content"] == Page(title="Café, home").body(urls[f"{H2} /"]).decode()
    assert home["content_base64"] is False
    assert base64.b64decode(str(image["content"])) == bytes(range(256))
    assert image["content_base64"] is True
    with (tmp_path / "pages.csv").open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == list(PageContentItem.fields)
        rows = {row["url"]: row for row in reader}
    assert rows[urls[f"{H2} /"]]["content"] == home["content"]
    assert rows[urls[f"{H2} /img"]]["content"] == image["content"]
