"""The memories of the demo's project ("ledgerline", a payments service): the ones its
script's queries need, and three that none does."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from asyncrecall.memory import FolderStore

__all__ = ["MEMORIES", "Memory", "write_memories"]


@dataclass(frozen=True, slots=True)
class Memory:
    """One topic file: what :meth:`FolderStore.save_memory` takes."""

    name: str
    description: str
    type: str
    content: str


def _m(name: str, type_: str, description: str, content: str) -> Memory:
    return Memory(name, description, type_, content)


MEMORIES: tuple[Memory, ...] = (
    _m("deploy-flow", "project", "Deploys go through staging (cluster blue) before production",
       "Every deploy goes to the staging cluster `blue` first; production (`green`) only after "
       "the smoke suite passed there. `make deploy ENV=staging`, then `ENV=prod`."),
    _m("ci-hang", "project", "CI hangs when integration tests open a real socket",
       "The integration tests hang on CI when a test opens a real socket to the bank sandbox: "
       "the runner has no egress. Use the `fake_bank` fixture (tests/conftest.py) instead."),
    _m("commit-style", "feedback", "Commit messages: imperative, under 60 chars, body says why",
       "The user corrected this twice: imperative subject, at most 60 characters, no trailing "
       "period; the body explains why, not what."),
    _m("test-runner", "reference", "How to run the tests: make test, -k to filter, slow marker",
       "`make test` runs everything with coverage; `make test ARGS='-k retry'` filters. Tests "
       "over a second are marked `slow` and still run in CI."),
    _m("retry-policy", "project", "HTTP retry policy: 3 attempts, backoff from 200 ms, 5xx and 429",
       "Outgoing HTTP calls retry 3 times with exponential backoff starting at 200 ms, only on "
       "5xx and 429, honouring Retry-After. See ledger/http/retry.py."),
    _m("small-prs", "user", "The user prefers small pull requests, one concern each",
       "Split work into small PRs that each do one thing; refactors separate from behaviour."),
    _m("logging", "feedback", "Use structlog, never print; snake_case log keys",
       "Logging goes through structlog with snake_case keys; print() is rejected in review."),
    _m("clock-in-tests", "feedback", "Tests inject a clock; no time.sleep in tests",
       "Flaky expiry tests came from real time. Inject `clock` (ledger/clock.py) and advance it."),
    _m("auth-tokens", "project", "Auth tokens are JWT RS256 with keys rotated monthly",
       "Tokens are RS256 JWTs; signing keys rotate on the 1st of each month (ops/rotate.sh)."),
    _m("webhooks", "project", "Webhooks are signed with HMAC-SHA256 in X-Ledger-Signature",
       "Outgoing webhooks carry an HMAC-SHA256 of the body in X-Ledger-Signature."),
)  # fmt: skip


def write_memories(root: Path) -> Mapping[str, str]:
    """Save :data:`MEMORIES` in a memory folder at ``root``; returns name -> relative path."""
    store = FolderStore(root)
    store.ensure()
    return {
        memory.name: store.save_memory(
            memory.name, memory.description, memory.type, memory.content, origin="user"
        ).rel_path
        for memory in MEMORIES
    }
