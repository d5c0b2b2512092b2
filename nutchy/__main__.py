"""``python -m nutchy`` and the ``nutchy`` console script: the ``nutchy`` command."""

import gc


def run() -> None:
    """Import the command's modules with the cyclic garbage collector off, then run
    :func:`nutchy.cli.run`.

    Importing nutchy, Scrapy and Twisted makes some 200,000 objects and next to no garbage
    cycles; with the collector on, the imports ran one full collection and dozens of young ones
    over them, for about 60 ms of the command's CPU time (0.43 s -> 0.37 s, medians of 12
    alternated imports of :mod:`nutchy.cli`, docs/benchmarks.md). The collector is back on
    before the command runs. Here rather than in :mod:`nutchy.cli`, whose own imports would
    come first.

    What the imports made is then frozen out of the collector (:func:`gc.freeze`): modules,
    classes and functions that live as long as the process. Left in the young generations, the
    first collections after the imports went over all of them once more (a collection of the
    middle generation of 70-80 ms at a re-crawl's start: ``nutchy crawl -sitemapsFromHostdb
    once``, docs/benchmarks.md), and every full collection later would too.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        from nutchy.cli import run as run_command
    finally:
        gc.freeze()
        if was_on:
            gc.enable()
    run_command()


if __name__ == "__main__":
    run()
