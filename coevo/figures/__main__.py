"""``python -m coevo.figures``: run, re-render or list the figures (see :mod:`coevo.figures`)."""

from __future__ import annotations

import sys

from coevo.figures._cli import main

if __name__ == "__main__":  # pytest's doctest collection imports this module: run only as a program
    sys.exit(main(sys.argv[1:]))
