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
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        from nutchy.cli import run as run_command
    finally:
        if was_on:
            gc.enable()
    run_command()


if __name__ == "__main__":
    run()
