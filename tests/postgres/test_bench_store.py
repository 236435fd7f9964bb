"""``asyncrecall bench store`` runs end to end on a tiny corpus (figures: README)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from asyncrecall.testing import LocalPostgres


@pytest.mark.timeout(300)
def test_the_store_benchmark_runs_and_reports_every_row(pg_server: LocalPostgres) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "asyncrecall", "bench", "store", "--store", pg_server.url,
         "--memories", "300", "--workers", "1,2", "--sessions", "2", "--seconds", "1",
         "--save-ratio", "0.3", "--json"],
        capture_output=True,
        text=True,
        timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["store"], r["workers"]) for r in rows] == [
        ("postgres", 1),
        ("postgres", 2),
        ("folder", 1),
    ]
    assert all(r["recalls"] > 0 and r["errors"] == 0 for r in rows)
    assert all(r["saves_per_s"] > 0 for r in rows)
    two = rows[1]
    assert two["invalidation_p50_ms"] is not None and two["invalidation_p50_ms"] > 0
