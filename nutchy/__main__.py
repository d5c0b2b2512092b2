"""``python -m nutchy``: the ``nutchy`` command."""

import sys

from nutchy.cli import main

if __name__ == "__main__":
    sys.exit(main())
