"""``asyncrecall demo``: the same scripted coding session in blocking, async and the
default async+lexical mode.

Offline: a throw-away project and memory folder in a temporary directory, and a
:class:`~asyncrecall.testing.LocalServer` on 127.0.0.1 playing the models. The CLI
(:mod:`asyncrecall.cli._demo`) shows the measured timelines.
"""

from __future__ import annotations

from asyncrecall.cli.demo._run import DEFAULT_MODE, DEMO_MODES, DemoResult, ModeRun, run_demo
from asyncrecall.cli.demo._scenario import SCRIPT, DemoQuery, ToolStep

__all__ = [
    "DEFAULT_MODE",
    "DEMO_MODES",
    "SCRIPT",
    "DemoQuery",
    "DemoResult",
    "ModeRun",
    "ToolStep",
    "run_demo",
]
