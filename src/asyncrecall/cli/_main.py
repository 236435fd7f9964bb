"""Entry point of the ``asyncrecall`` command."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    del argv
    sys.stderr.write("asyncrecall: not built yet\n")
    return 2
