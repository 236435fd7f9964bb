"""The benchmarks' figures (``--plot FILE``): what a curve is, and what a bad file is."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from asyncrecall.cli import main
from asyncrecall_bench._measure import percentile
from asyncrecall_bench._plot import CDF_POINTS, ecdf_points


@given(st.lists(st.floats(min_value=0, max_value=1e5), min_size=1, max_size=400))
def test_a_cdf_climbs_to_every_value(values: list[float]) -> None:
    """The curve is the empirical CDF: values and shares never go down, it ends at the
    largest value with share 1, it starts at the smallest, and it never has more than
    ``CDF_POINTS`` points, however many values."""
    points = ecdf_points(values)
    assert len(points) == min(len(values), CDF_POINTS)
    xs, ys = [x for x, _ in points], [y for _, y in points]
    assert xs == sorted(xs) and ys == sorted(ys)
    assert xs[-1] == max(values) and xs[0] == min(values) and ys[-1] == 1.0
    if len(values) > CDF_POINTS:
        assert xs[CDF_POINTS // 2] == pytest.approx(percentile(values, 50))


@pytest.mark.parametrize(
    ("name", "words"), [("figure.png", "name a .svg file"), ("missing/figure.svg", "not a folder")]
)
@pytest.mark.parametrize("kind", ["latency", "recall"])
def test_a_bad_plot_file_is_a_usage_error_before_any_run(
    kind: str, name: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``--plot`` that cannot be written (not ``.svg``, no such folder) is exit 2 with one
    line, before anything is measured; nothing is written."""
    dataset = tmp_path / "locomo.json"
    dataset.write_text("[]")
    extra = ["--dataset", str(dataset)] if kind == "recall" else []
    assert main(["bench", kind, "--quick", *extra, "--plot", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["locomo.json"]
