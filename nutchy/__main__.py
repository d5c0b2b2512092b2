"""``python -m nutchy``: the ``nutchy`` command."""

from nutchy.cli import run

if __name__ == "__main__":
    run()
