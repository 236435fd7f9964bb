"""The command line: run, chat, memory, demo, bench."""

from __future__ import annotations

from asyncrecall.cli._main import main

__all__ = ["main"]
