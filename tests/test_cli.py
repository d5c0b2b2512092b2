"""The ``nutchy`` command (inject, generate, readdb, storage) and ``scrapy inject``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nutchy.cli import build_parser, main

SEEDS = textwrap.dedent(
    """\
    # seeds for the CLI tests
    http://www.example.com/\tnutch.score=3\tlang=en
    http://www.example.com/
    http://www.example.org/a
    https://shop.example.net/item?id=7
    www.no-scheme.com
    http://img.example.com/logo.png
    """
)


@pytest.fixture
def crawl(tmp_path, monkeypatch):
    """Run in an empty directory (no Scrapy project), with the crawl files in tmp_path/crawl."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE", raising=False)
    (tmp_path / "seeds").mkdir()
    (tmp_path / "seeds" / "seeds.txt").write_text(SEEDS, encoding="utf-8")
    return tmp_path


def nutchy(crawl: Path, *args: str) -> int:
    return main([*args, "-s", f"NUTCH_CRAWL_DIR={crawl / 'crawl'}"])


def test_inject_prints_counts(crawl, capsys):
    assert nutchy(crawl, "inject", str(crawl / "seeds")) == 0
    out = capsys.readouterr().out
    assert "Injected 3 new URLs into table webpage" in out
    for label, value in [
        ("lines read", 7),
        ("injected", 3),
        ("duplicates", 1),
        ("filtered", 1),
        ("malformed", 1),
        ("already known", 0),
    ]:
        assert f"{label + ':':<15}{value:>10}" in out
    assert "seeds.txt:6: no scheme" in out
    assert "Created table webpage: it did not exist yet" in out
    assert nutchy(crawl, "inject", str(crawl / "seeds" / "seeds.txt")) == 0
    out = capsys.readouterr().out
    assert f"{'already known:':<15}{3:>10}" in out
    assert "Created table" not in out


def test_inject_exit_code_when_nothing_can_be_read(crawl, capsys):
    assert nutchy(crawl, "inject", str(crawl / "missing")) == 1
    assert "does not exist" in capsys.readouterr().err
    (crawl / "empty").mkdir()
    assert nutchy(crawl, "inject", str(crawl / "empty")) == 1
    assert "holds no seed file" in capsys.readouterr().err
    (crawl / "empty" / "none.txt").write_text("")
    assert nutchy(crawl, "inject", str(crawl / "empty")) == 1
    assert "nothing could be read" in capsys.readouterr().err
    # all lines bad still counts as read
    (crawl / "bad.txt").write_bytes(b"\xff\xfe\n")
    assert nutchy(crawl, "inject", str(crawl / "bad.txt")) == 0
    assert "not UTF-8" in capsys.readouterr().out


def test_inject_options(crawl, capsys):
    assert nutchy(crawl, "inject", "-overwrite", "-update", str(crawl / "seeds")) == 2
    assert "not allowed with argument" in capsys.readouterr().err
    assert nutchy(crawl, "inject", "-noFilter", str(crawl / "seeds")) == 0
    assert f"{'injected:':<15}{4:>10}" in capsys.readouterr().out
    (crawl / "more.txt").write_text("http://www.example.com/\tnutch.score=7\n")
    assert nutchy(crawl, "inject", "-update", str(crawl / "more.txt")) == 0
    assert f"{'updated:':<15}{1:>10}" in capsys.readouterr().out
    assert nutchy(crawl, "readdb", "-topN", "1") == 0
    assert capsys.readouterr().out == "7\thttp://www.example.com/\n"


def test_generate_prints_the_batch_id_and_exits_1_when_empty(crawl, capsys):
    nutchy(crawl, "inject", str(crawl / "seeds"))
    capsys.readouterr()
    assert nutchy(crawl, "generate", "-topN", "2") == 0
    captured = capsys.readouterr()
    batch = captured.out.strip()
    assert batch.split("-")[0].isdigit() and batch.split("-")[1].isdigit()
    assert f"batch {batch}: 2 URLs selected" in captured.err
    assert nutchy(crawl, "generate", "-batchId", "second", "-numFetchers", "2") == 0
    captured = capsys.readouterr()
    assert captured.out == "second\n"
    assert "1 URLs selected in 2 partitions" in captured.err
    assert "2 in unfinished batches" in captured.err
    assert nutchy(crawl, "generate") == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "0 URLs selected" in captured.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-topN", "0"], "argument -topN: must be at least 1, got 0"),
        (["-topN", "-3"], "argument -topN: must be at least 1, got -3"),
        (["-topN", "ten"], "argument -topN: expected a whole number, got 'ten'"),
        (["-numFetchers", "0"], "argument -numFetchers: must be at least 1"),
        (["-batchId", "has space"], "argument -batchId: a batch id is"),
        (["-s", "NUTCH_GENERATE_COUNT_MODE=ip"], "NUTCH_GENERATE_COUNT_MODE must be one of"),
        (["-s", "NUTCH_GENERATE_MAX_COUNT=-7"], "NUTCH_GENERATE_MAX_COUNT must be >= -1"),
    ],
)
def test_generate_bad_arguments_change_nothing(crawl, capsys, args, message):
    nutchy(crawl, "inject", str(crawl / "seeds"))
    capsys.readouterr()
    assert nutchy(crawl, "generate", *args) == 2
    assert message in capsys.readouterr().err
    assert nutchy(crawl, "readdb", "-stats") == 0
    assert "generated, batch" not in capsys.readouterr().out


def test_generate_without_a_table(crawl, capsys):
    assert nutchy(crawl, "generate", "-topN", "5") == 2
    assert "does not exist" in capsys.readouterr().err


def test_readdb(crawl, capsys):
    nutchy(crawl, "inject", str(crawl / "seeds"))
    capsys.readouterr()
    assert nutchy(crawl, "readdb", "-stats") == 0
    out = capsys.readouterr().out
    assert "TOTAL urls:\t3" in out
    assert "status 0 (status_injected):\t3" in out
    assert nutchy(crawl, "readdb", "-url", "http://WWW.example.com:80/") == 0
    out = capsys.readouterr().out
    assert "url:\thttp://www.example.com/" in out
    assert "\tlang:\ten" in out
    assert nutchy(crawl, "readdb", "-url", "http://nowhere.example/") == 1
    assert "is not in table webpage" in capsys.readouterr().err
    assert nutchy(crawl, "readdb", "-dump", "out", "-regex", "example\\.(com|org)") == 0
    assert "Dumped 2 rows to out/webpage.jsonl" in capsys.readouterr().out
    urls = [json.loads(line)["url"] for line in Path("out/webpage.jsonl").read_text().splitlines()]
    assert urls == ["http://www.example.com/", "http://www.example.org/a"]
    assert nutchy(crawl, "readdb", "-dump", "csv", "-format", "csv", "-status", "injected") == 0
    assert Path("csv/webpage.csv").read_text().count("\n") == 4
    assert nutchy(crawl, "readdb", "-dump", "x", "-status", "done") == 2
    assert "unknown status 'done'" in capsys.readouterr().err
    assert nutchy(crawl, "readdb", "-stats", "-topN", "3") == 2
    assert "not allowed with argument" in capsys.readouterr().err
    assert nutchy(crawl, "readdb", "-stats", "-regex", "x") == 2
    assert "-regex only applies to -dump" in capsys.readouterr().err


def test_storage_subcommand_still_works(crawl, capsys):
    assert nutchy(crawl, "storage", "info") == 0
    assert "does not exist" in capsys.readouterr().out
    assert nutchy(crawl, "storage", "init") == 0
    assert "Created table webpage" in capsys.readouterr().out
    assert nutchy(crawl, "storage", "drop") == 2
    assert nutchy(crawl, "storage", "drop", "--confirm") == 0


def test_help_exits_0(capsys):
    assert main(["generate", "--help"]) == 0
    assert "-topN N" in capsys.readouterr().out


def test_scrapy_inject_in_a_project(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "__init__.py").write_text("")
    (project / "settings.py").write_text(
        'BOT_NAME = "proj"\nCOMMANDS_MODULE = "nutchy.commands"\nNUTCH_CRAWL_DIR = "crawl"\n'
    )
    (tmp_path / "scrapy.cfg").write_text("[settings]\ndefault = proj.settings\n")
    (tmp_path / "seeds.txt").write_text("http://www.example.com/\nnot a url\n")
    env = {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}
    result = subprocess.run(
        [sys.executable, "-m", "scrapy", "inject", "seeds.txt", "-s", "NUTCH_STORAGE_CRAWL_ID=x"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Injected 1 new URLs into table x_webpage" in result.stdout
    assert (tmp_path / "crawl" / "x_webpage.sqlite").exists()
    assert "reactor" not in result.stderr.lower()
    missing = subprocess.run(
        [sys.executable, "-m", "scrapy", "inject", "nothing-here"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert missing.returncode == 1
    assert "does not exist" in missing.stderr


def test_unknown_batch_is_an_error_for_parse_and_updatedb(crawl, capsys):
    nutchy(crawl, "inject", str(crawl / "seeds"))
    capsys.readouterr()
    for verb in ("parse", "updatedb"):
        assert nutchy(crawl, verb, "999-999") == 1
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith(f"nutchy {verb}: no batch '999-999' in table webpage (")
        assert str(crawl / "crawl" / "webpage.sqlite") in line


def test_a_batch_never_fetched_says_what_parse_and_updatedb_did(crawl, capsys):
    nutchy(crawl, "inject", str(crawl / "seeds"))
    assert nutchy(crawl, "generate", "-batchId", "b1") == 0
    capsys.readouterr()
    assert nutchy(crawl, "parse", "b1") == 0
    assert capsys.readouterr().err == (
        "nutchy parse: batch b1 has no fetched page to parse: it was generated and not fetched"
        " (run: nutchy fetch b1)\n"
    )
    assert nutchy(crawl, "updatedb", "b1") == 0
    err = capsys.readouterr().err
    assert err == (
        "nutchy updatedb: batch b1 was never fetched: dropped its generate mark from 3 rows,"
        " which can be generated again; no status, score or outlink changed\n"
    )
    # So they can: generate selects the same 3 URLs again.
    assert nutchy(crawl, "generate", "-batchId", "b2") == 0
    assert "batch b2: 3 URLs selected" in capsys.readouterr().err
    # b1 is gone from the table now: no row holds a mark of it.
    assert nutchy(crawl, "updatedb", "b1") == 1
    assert "no batch 'b1'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "usage", "unknown"),
    [
        (["generate", "-topn", "10"], "usage: nutchy generate ", "-topn 10"),
        (["readdb", "-stats", "-x"], "usage: nutchy readdb ", "-x"),
        (["storage", "info", "--nope"], "usage: nutchy storage info ", "--nope"),
    ],
)
def test_an_unknown_option_is_said_by_its_subcommand(capsys, args, usage, unknown):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(usage)  # not the top-level usage
    assert f"error: unrecognized arguments: {unknown}\n" in err


def test_version(capsys):
    from nutchy import __version__

    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["--version"])
    assert exited.value.code == 0
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"nutchy {__version__}\nnutchy {__version__}\n"


def test_readdb_into_a_pipe_closed_early_ends_quietly(crawl):
    (crawl / "many.txt").write_text(
        "".join(f"http://h{i}.example.com/page/{i}\n" for i in range(4000)), encoding="utf-8"
    )
    command = [sys.executable, "-m", "nutchy.cli"]
    where = ["-s", f"NUTCH_CRAWL_DIR={crawl / 'crawl'}"]
    inject = [*command, "inject", str(crawl / "many.txt"), *where]
    subprocess.run(inject, check=True, capture_output=True, timeout=60)
    # nutchy readdb -topN 5000 | head -1: the reader closes the pipe after one line.
    with subprocess.Popen(
        [*command, "readdb", "-topN", "5000", *where],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as reader:
        assert reader.stdout is not None and reader.stderr is not None
        first = reader.stdout.readline()
        reader.stdout.close()
        err = reader.stderr.read().decode()
        assert reader.wait(timeout=60) == 141  # as a tool that SIGPIPE ends
    assert first.startswith(b"1\thttp://h")
    assert err == ""


@pytest.mark.slow
def test_fetch_runs_the_nutch_spider_on_a_batch(crawl):
    from sites import Site

    command = [sys.executable, "-m", "nutchy.cli"]
    where = ["-s", f"NUTCH_CRAWL_DIR={crawl / 'crawl'}"]
    quiet = ["-s", "LOG_LEVEL=WARNING", "-s", "NUTCH_FETCHER_SERVER_DELAY=0"]
    with Site(("127.0.0.2",)) as site:
        url = site.url("127.0.0.2", "/page/1")
        (crawl / "one.txt").write_text(f"{url}\n", encoding="utf-8")
        assert nutchy(crawl, "inject", str(crawl / "one.txt")) == 0
        assert nutchy(crawl, "generate", "-batchId", "b1") == 0

        unknown = subprocess.run(
            [*command, "fetch", "NOSUCH", *where, *quiet],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert unknown.returncode == 1
        (line,) = unknown.stderr.splitlines()
        assert "ERROR: The nutch spider cannot start: no batch 'NOSUCH' in table webpage" in line

        fetched = subprocess.run(
            [*command, "fetch", "b1", *where, *quiet],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert fetched.returncode == 0, fetched.stderr
        assert "Traceback" not in fetched.stderr
        assert [hit.path for hit in site.hits["127.0.0.2"]] == ["/robots.txt", "/page/1"]
    dumped = subprocess.run(
        [*command, "readdb", "-url", url, *where], check=True, capture_output=True, text=True
    )
    assert "status:\t2 (status_fetched)" in dumped.stdout


@pytest.mark.parametrize(("argv", "code"), [(["--help"], 0), (["nosuch"], 2)])
def test_the_program_exits_with_mains_code_its_objects_frozen_first(argv, code):
    program = textwrap.dedent(
        f"""
        import gc, sys
        from nutchy.cli import run
        sys.argv = ["nutchy", *{argv!r}]
        try:
            run()
        except SystemExit as exc:
            print("exit", exc.code, "frozen", gc.get_freeze_count() > 0, file=sys.stderr)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stderr.splitlines()[-1] == f"exit {code} frozen True"
    # python -m nutchy is the same program
    done = subprocess.run(
        [sys.executable, "-m", "nutchy", *argv], capture_output=True, timeout=60, check=False
    )
    assert done.returncode == code


def test_the_program_imports_its_modules_with_the_collector_off():
    """nutchy.__main__.run (the console script and python -m nutchy) imports nutchy.cli, and
    with it Scrapy, without a single garbage collection, where a plain import runs some; the
    collector is on again for the command."""
    program = textwrap.dedent(
        """
        import gc, sys
        how = sys.argv[1]
        collections = []

        def importing():  # nutchy.cli's import has begun, and not ended
            cli = sys.modules.get("nutchy.cli")
            return cli is not None and not hasattr(cli, "run")

        def noted(phase, info):
            if phase == "start" and importing():
                collections.append(1)

        gc.callbacks.append(noted)
        if how == "program":
            import nutchy.__main__
            sys.argv = ["nutchy", "--help"]
            try:
                nutchy.__main__.run()
            except SystemExit:
                pass
        else:
            import nutchy.cli
        print(how, len(collections), gc.isenabled(), file=sys.stderr)
        """
    )
    seen = {}
    for how in ("program", "import"):
        done = subprocess.run(
            [sys.executable, "-c", program, how],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        printed, collections, enabled = done.stderr.splitlines()[-1].split()
        assert printed == how, done.stderr
        seen[how] = (int(collections), enabled)
    assert seen["program"] == (0, "True")
    assert seen["import"][0] > 0


def test_the_program_freezes_what_its_imports_made_before_the_command():
    """nutchy.__main__.run freezes the objects of its imports out of the collector before the
    command runs (the young collections after the imports no longer go over them), with the
    collector on; a plain import of nutchy.cli freezes nothing."""
    program = textwrap.dedent(
        """
        import gc, sys
        import nutchy.__main__
        import nutchy.cli
        print("imported", gc.get_freeze_count() > 0, file=sys.stderr)

        def command():
            print("command", gc.get_freeze_count() > 0, gc.isenabled(), file=sys.stderr)

        nutchy.cli.run = command
        nutchy.__main__.run()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-2:] == ["imported False", "command True True"]
