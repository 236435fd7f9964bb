"""The memories and user queries of the latency benchmarks.

A fictional payments service, "ledgerline", whose agent has saved three dozen
memories over earlier sessions. Each user query names the memories a good selector
picks for it; the scripted side query answers with those (the benchmarks measure
*when* memory arrives, not *which*: selection quality is ``bench quality``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from asyncrecall.memory import FolderStore

__all__ = ["MEMORIES", "QUERIES", "Memory", "Query", "build_memory_folder"]


@dataclass(frozen=True, slots=True)
class Memory:
    """One topic file: what :meth:`FolderStore.save_memory` takes."""

    name: str
    description: str
    type: str
    content: str


@dataclass(frozen=True, slots=True)
class Query:
    """A user query and the names of the memories relevant to it."""

    text: str
    memories: tuple[str, ...]


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
    _m("db-migrations", "project", "Database migrations use alembic; never edit an applied one",
       "Schema changes go through alembic (`migrations/`). Never edit a migration that was "
       "applied in staging: add a new one."),
    _m("retry-policy", "project", "HTTP retry policy: 3 attempts, backoff from 200 ms, 5xx and 429",
       "Outgoing HTTP calls retry 3 times with exponential backoff starting at 200 ms, only on "
       "5xx and 429, honouring Retry-After. See ledger/http/retry.py."),
    _m("small-prs", "user", "The user prefers small pull requests, one concern each",
       "Split work into small PRs that each do one thing; refactors separate from behaviour."),
    _m("logging", "feedback", "Use structlog, never print; snake_case log keys",
       "Logging goes through structlog with snake_case keys; print() is rejected in review."),
    _m("config-loader", "project", "Configuration is loaded by settings/loader.py: TOML then env",
       "settings/loader.py reads config/base.toml, then the environment (LEDGER_*)."),
    _m("api-versioning", "project", "The public API is versioned under /v2; /v1 is frozen",
       "New endpoints go under /v2. /v1 is frozen: bug fixes only, no new fields."),
    _m("clock-in-tests", "feedback", "Tests inject a clock; no time.sleep in tests",
       "Flaky expiry tests came from real time. Inject `clock` (ledger/clock.py) and advance it."),
    _m("release-process", "reference", "Release: bump pyproject version, tag vX.Y.Z, changelog",
       "Bump the version in pyproject.toml, update CHANGELOG.md, tag vX.Y.Z; CI publishes."),
    _m("error-handling", "feedback", "Raise domain errors from the exception tree; no bare except",
       "Errors derive from LedgerError (ledger/errors.py) and are raised `from` their cause."),
    _m("typing", "feedback", "mypy --strict on src; no Any in public signatures",
       "Public functions are fully typed; Any only at the JSON boundary, wrapped at once."),
    _m("cache-layer", "project", "Redis cache: keys prefixed ll:, TTL 300 s",
       "The read cache uses Redis with keys `ll:<entity>:<id>` and a 300 s TTL."),
    _m("auth-tokens", "project", "Auth tokens are JWT RS256 with keys rotated monthly",
       "Tokens are RS256 JWTs; signing keys rotate on the 1st of each month (ops/rotate.sh)."),
    _m("oncall", "reference", "On-call runbook is docs/oncall.md; the rota lives in PagerDuty",
       "Start any incident from docs/oncall.md; escalation after 15 minutes."),
    _m("perf-budget", "project", "p95 latency budget for /v2/payments is 250 ms",
       "The payments endpoint must keep p95 under 250 ms; the load test is in perf/."),
    _m("money-rounding", "project", "Amounts are integer minor units; round half-even at display",
       "Never use floats for money: integer minor units, half-even rounding only when shown."),
    _m("feature-flags", "project", "Feature flags live in flags.yaml, read with flags.enabled()",
       "Add a flag to flags.yaml with an owner and an expiry date; read it with flags.enabled()."),
    _m("docker-dev", "reference", "docker compose up starts postgres and redis for development",
       "`docker compose up -d` starts postgres 16 and redis 7 on their default ports."),
    _m("user-editor", "user", "The user works in neovim and likes unified diffs in answers",
       "Show changes as unified diffs; the user applies them by hand in neovim."),
    _m("module-naming", "feedback", "Private modules are _name.py; the public API is re-exported",
       "Implementation lives in _private.py modules; __init__ re-exports with a sorted __all__."),
    _m("webhooks", "project", "Webhooks are signed with HMAC-SHA256 in X-Ledger-Signature",
       "Outgoing webhooks carry an HMAC-SHA256 of the body in X-Ledger-Signature."),
    _m("queue-worker", "project", "Jobs run on dramatiq and RabbitMQ; handlers are idempotent",
       "Jobs are dramatiq actors on RabbitMQ; every handler must be idempotent (retries)."),
    _m("data-retention", "project", "PII is deleted after 30 days; audit logs kept 7 years",
       "A nightly job deletes PII older than 30 days; audit logs are kept for 7 years."),
    _m("dependencies", "feedback", "Ask before adding a dependency; pin it in constraints.txt",
       "New dependencies need the user's approval and a pin in constraints.txt."),
    _m("benchmarks", "reference", "Benchmarks: run make bench, commit the table",
       "Run `make bench` and paste the table with the command into benchmarks/README.md."),
    _m("timezones", "feedback", "Store UTC; convert to the user's zone only in templates",
       "Datetimes are stored in UTC and converted to the customer's zone only when rendered."),
    _m("pagination", "project", "Cursor pagination with opaque base64 cursors, page size max 100",
       "List endpoints take `cursor` and `limit` (max 100); cursors are opaque base64."),
    _m("user-language", "user", "The user is French and writes in English; explain idioms",
       "Prefer plain English; explain idioms and abbreviations briefly."),
    _m("sql-style", "feedback", "SQLAlchemy core only; no ORM lazy loads in request handlers",
       "Queries use SQLAlchemy core; the ORM's lazy loading caused N+1 queries before."),
    _m("slo", "reference", "SLO is 99.9% monthly; the error budget dashboard is payments-slo",
       "The Grafana dashboard `payments-slo` shows the burn rate; alerts at 2% per hour."),
    _m("secrets", "project", "Secrets come from Vault at start-up, never from committed env files",
       "The app reads secrets from Vault (path secret/ledger) at start-up."),
    _m("code-review", "feedback", "Review order: tests, then the API, then the code",
       "When reviewing, read the tests first, then the public API, then the code."),
    _m("locale-format", "project", "Amounts are formatted with babel using Accept-Language",
       "Format amounts with babel.numbers.format_currency and the request's locale "
       "(German customers get de_DE)."),
)  # fmt: skip

QUERIES: tuple[Query, ...] = (
    Query("Deploy the hotfix for the refund bug to production", ("deploy-flow", "release-process")),
    Query("Why does CI hang on the integration tests?", ("ci-hang", "test-runner")),
    Query("Write the commit message for this change", ("commit-style",)),
    Query("Add retries to the webhook sender", ("retry-policy", "webhooks")),
    Query("Add a currency column to the payments table", ("db-migrations", "money-rounding")),
    Query("Where is the configuration loaded from?", ("config-loader",)),
    Query("Fix the flaky token expiry test", ("clock-in-tests", "auth-tokens")),
    Query("Cut release 2.4.0", ("release-process",)),
    Query("Why is /v2/payments slow under load?", ("perf-budget", "cache-layer")),
    Query("Round the refund amount before showing it", ("money-rounding",)),
    Query("Put the new checkout behind a flag", ("feature-flags",)),
    Query("Set up a development environment for me", ("docker-dev",)),
    Query("Paginate the transactions endpoint", ("pagination", "api-versioning")),
    Query("Add logging to the settlement worker", ("logging", "queue-worker")),
    Query("Delete old customer data", ("data-retention",)),
    Query("Add httpx as a dependency", ("dependencies",)),
    Query("Show invoice dates in the customer's time zone", ("timezones",)),
    Query("Load the API keys for the bank connector", ("secrets",)),
    Query("Review my pull request for the payouts module", ("code-review", "small-prs")),
    Query("Format amounts for German customers", ("locale-format", "money-rounding")),
    Query("Run the benchmarks and update the table", ("benchmarks",)),
    Query("Refactor the queries of the payment handler", ("sql-style",)),
    Query("Type the public client API", ("typing", "module-naming")),
    Query("Which alert fires when the error budget burns?", ("slo", "oncall")),
)


def build_memory_folder(root: Path, memories: Iterable[Memory] = MEMORIES) -> Mapping[str, str]:
    """Save ``memories`` in a memory folder at ``root``; returns name -> relative path."""
    store = FolderStore(root)
    store.ensure()
    return {
        memory.name: store.save_memory(
            memory.name, memory.description, memory.type, memory.content, origin="user"
        ).rel_path
        for memory in memories
    }
