"""Figures of the benchmarks, as small self-contained SVG (``bench latency|recall --plot``).

Written by hand, not by a plotting library: two kinds of panel are all the figures need
(the distribution of the latency each mode adds, as an empirical CDF, and stacked
shares per mode), the output is a few kilobytes of text that diffs, and the same run
draws the same bytes (no timestamps, no random ids). The README's figures and the
console's benchmark page show these files.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Final

from asyncrecall._exceptions import ConfigError
from asyncrecall_bench._latency_data import LatencyReport
from asyncrecall_bench._measure import percentile
from asyncrecall_bench._recall_data import REFERENCE, RecallBenchReport

__all__ = [
    "add_plot_flag",
    "ecdf_points",
    "latency_figure",
    "plot_target",
    "recall_figure",
    "write_figure",
]

#: A colour per series, fixed so that a mode looks the same in every figure.
COLOURS: Final = {
    "blocking": "#c0392b",
    "async": "#2e86c1",
    "async+wait100": "#8e44ad",
    "async+lexical": "#16a085",
    REFERENCE: "#7f8c8d",
}
_OTHER: Final = ("#d35400", "#2c3e50", "#27ae60")
#: Points of a CDF drawn at most (its quantiles): the file stays small for any run.
CDF_POINTS: Final = 101
_WIDTH: Final = 760
_FONT: Final = "font-family='system-ui,sans-serif' font-size='12'"


def ecdf_points(values: Sequence[float], *, points: int = CDF_POINTS) -> list[tuple[float, float]]:
    """The empirical CDF of ``values`` as ``(value, share)``: the ``points`` evenly spaced
    quantiles (all of them when there are fewer values), share from 0 to 1."""
    if not values:
        return []
    if len(values) <= points:
        ordered = sorted(values)
        n = len(ordered)
        return [(v, (i + 1) / n) for i, v in enumerate(ordered)]
    return [(percentile(values, 100 * i / (points - 1)), i / (points - 1)) for i in range(points)]


def latency_figure(report: LatencyReport) -> str:
    """``bench latency``: each mode's added latency (CDF) and where memory first reached
    the model (user query, a tool result, or missed)."""
    added = {mode: result.added_ms() for mode, result in report.modes.items()}
    shares: dict[str, list[tuple[str, float]]] = {}
    for mode, result in report.modes.items():
        landed, n = result.landed(), max(1, len(result.traces))
        shares[mode] = [(point, landed[point] / n) for point in _POINTS]
    n = report.config.queries
    return _figure(
        f"Latency recall adds before the first request ({n} queries per mode)",
        added,
        "Where memory first reached the model",
        shares,
        dict(zip(_POINTS, _POINT_COLOURS, strict=True)),
    )


_POINTS: Final = ("user_query", "tool_result", "missed")
_POINT_COLOURS: Final = ("#16a085", "#f39c12", "#bdc3c7")


def recall_figure(report: RecallBenchReport) -> str:
    """``bench recall``: each mode's added latency beside memory off (CDF), and what it
    delivered: gold, junk on a question with gold, junk on a question without."""
    added: dict[str, Sequence[float]] = {
        mode: figures.added_ms for mode, figures in report.modes.items()
    }
    if report.reference_ms:
        added[REFERENCE] = report.reference_ms
    shares: dict[str, list[tuple[str, float]]] = {}
    for mode, figures in report.modes.items():
        data = figures.as_json()
        shares[mode] = [
            ("gold delivered", data["positive"]["gold_delivered"]),
            ("junk only (has gold)", data["positive"]["junk_delivered"]),
            ("junk (no gold)", data["negative"]["junk_delivered"]),
        ]
    positives = sum(not c.negative for c in report.cases)
    colours = dict(zip((s for s, _ in next(iter(shares.values()), [])), _DELIVERY, strict=False))
    return _figure(
        f"Latency recall adds, LoCoMo ({positives} questions, each also as a negative)",
        added,
        "What reached the model (share of questions, each bar on its own)",
        shares,
        colours,
        stacked=False,
    )


_DELIVERY: Final = ("#16a085", "#e67e22", "#c0392b")


def add_plot_flag(parser: argparse.ArgumentParser) -> None:
    """``--plot FILE`` on a benchmark's command line."""
    parser.add_argument(
        "--plot", type=Path, metavar="FILE", help="also draw the results as an SVG figure in FILE"
    )


def plot_target(path: Path | None) -> Path | None:
    """``--plot``'s file, checked before anything is measured: an ``.svg`` file in an
    existing folder (else a :class:`ConfigError`, exit 2)."""
    if path is None:
        return None
    if path.suffix.lower() != ".svg":
        raise ConfigError(f"--plot writes SVG: name a .svg file, got {path}")
    if not path.absolute().parent.is_dir():
        raise ConfigError(f"--plot: {path.absolute().parent} is not a folder")
    return path


def write_figure(path: Path, svg: str) -> None:
    """``svg`` into ``path`` (checked by :func:`plot_target`) atomically: a temporary
    file beside it, then renamed."""
    folder = path.absolute().parent
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(svg)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # as a file the shell made (mkstemp: 0600)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


# -- drawing ---------------------------------------------------------------------------------


def _figure(
    title: str,
    series: Mapping[str, Sequence[float]],
    bars_title: str,
    shares: Mapping[str, Sequence[tuple[str, float]]],
    segment_colours: Mapping[str, str],
    *,
    stacked: bool = True,
) -> str:
    colours = _colours(series)
    cdf_h, bar_row = 260, 26 if stacked else 18
    rows = len(shares) if stacked else sum(len(s) for s in shares.values())
    bars_h = 60 + rows * bar_row + (0 if stacked else 6 * len(shares))
    height = 40 + cdf_h + 70 + bars_h
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{_WIDTH}' height='{height}' "
        f"viewBox='0 0 {_WIDTH} {height}' {_FONT}>",
        f"<rect width='{_WIDTH}' height='{height}' fill='white'/>",
        f"<text x='16' y='24' font-size='15' font-weight='bold'>{escape(title)}</text>",
    ]
    parts += _cdf_panel(series, colours, x=70, y=44, w=_WIDTH - 300, h=cdf_h)
    top = 44 + cdf_h + 60
    parts.append(f"<text x='16' y='{top}' font-size='14' font-weight='bold'>"
                 f"{escape(bars_title)}</text>")  # fmt: skip
    parts += _bars_panel(shares, segment_colours, colours, top + 16, bar_row, stacked=stacked)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _colours(series: Mapping[str, object]) -> dict[str, str]:
    spare = iter(_OTHER * (1 + len(series)))
    return {name: COLOURS.get(name) or next(spare) for name in series}


def _cdf_panel(
    series: Mapping[str, Sequence[float]],
    colours: Mapping[str, str],
    *,
    x: int,
    y: int,
    w: int,
    h: int,
) -> list[str]:
    values = [v for vs in series.values() for v in vs if math.isfinite(v)]
    # A log scale of 1 + ms: 0 stays 0, and a 0.1 ms mode is told apart from a 1 ms one
    # on the axis that also holds a 1,000 ms one.
    decades = max(1, math.ceil(math.log10(1 + max(values, default=1.0))))

    def at(value: float) -> float:
        return x + w * math.log10(1 + max(0.0, value)) / decades

    parts = [f"<rect x='{x}' y='{y}' width='{w}' height='{h}' fill='none' stroke='#999'/>"]
    for tick in (0.0, *(10.0**d for d in range(decades + 1))):
        tx = at(tick)
        parts.append(f"<line x1='{tx:.1f}' y1='{y}' x2='{tx:.1f}' y2='{y + h}' stroke='#eee'/>")
        parts.append(f"<text x='{tx:.1f}' y='{y + h + 16}' text-anchor='middle'>"
                     f"{_number(tick)}</text>")  # fmt: skip
    for i in range(6):
        ty = y + h - h * i / 5
        parts.append(f"<line x1='{x}' y1='{ty:.1f}' x2='{x + w}' y2='{ty:.1f}' stroke='#eee'/>")
        parts.append(f"<text x='{x - 6}' y='{ty + 4:.1f}' text-anchor='end'>{i * 20}%</text>")
    parts.append(f"<text x='{x + w / 2:.0f}' y='{y + h + 34}' text-anchor='middle'>"
                 "added latency before the first main request (ms, log scale)</text>")  # fmt: skip
    parts.append(f"<text x='16' y='{y + h / 2:.0f}' transform='rotate(-90 16 {y + h / 2:.0f})' "
                 "text-anchor='middle'>share of queries at or below</text>")  # fmt: skip
    for n, (name, vs) in enumerate(series.items()):
        points = ecdf_points([v for v in vs if math.isfinite(v)])
        if not points:
            continue
        path: list[tuple[float, float]] = [(x, y + h)]
        for value, share in points:
            px = at(value)
            path += [(px, path[-1][1]), (px, y + h - h * share)]  # a step function
        coords = " ".join(f"{px:.1f},{py:.1f}" for px, py in path)
        colour = colours[name]
        parts.append(f"<polyline class='cdf' data-series='{escape(name)}' points='{coords}' "
                     f"fill='none' stroke='{colour}' stroke-width='2'/>")  # fmt: skip
        ly = y + 14 + n * 40
        p50, p99 = percentile(vs, 50), percentile(vs, 99)
        parts.append(f"<rect x='{x + w + 16}' y='{ly - 9}' width='12' height='12' "
                     f"fill='{colour}'/>")  # fmt: skip
        parts.append(f"<text x='{x + w + 34}' y='{ly + 1}'>{escape(name)}</text>")
        parts.append(f"<text x='{x + w + 34}' y='{ly + 17}' fill='#555'>p50 {_number(p50)} ms, "
                     f"p99 {_number(p99)} ms</text>")  # fmt: skip
    return parts


def _bars_panel(
    shares: Mapping[str, Sequence[tuple[str, float]]],
    segment_colours: Mapping[str, str],
    mode_colours: Mapping[str, str],
    top: int,
    row: int,
    *,
    stacked: bool,
) -> list[str]:
    x, w = 150, _WIDTH - 330
    parts: list[str] = []
    y = top
    for mode, segments in shares.items():
        parts.append(f"<text x='{x - 8}' y='{y + row * 0.7:.1f}' text-anchor='end' "
                     f"fill='{mode_colours.get(mode, '#000')}'>{escape(mode)}</text>")  # fmt: skip
        left = float(x)
        for name, share in segments:
            width = w * max(0.0, min(1.0, share))
            colour = segment_colours.get(name, "#999")
            parts.append(f"<rect class='share' data-mode='{escape(mode)}' "
                         f"data-segment='{escape(name)}' data-share='{share:.4f}' "
                         f"x='{left:.1f}' y='{y + 2}' width='{width:.1f}' height='{row - 6}' "
                         f"fill='{colour}'/>")  # fmt: skip
            if not stacked:
                parts.append(f"<text x='{left + width + 6:.1f}' y='{y + row * 0.65:.1f}'>"
                             f"{share:.0%}</text>")  # fmt: skip
                y += row
            else:
                left += width
        if stacked:
            y += row
        else:
            y += 6
    legend_y = y + 18
    for n, (name, colour) in enumerate(segment_colours.items()):
        lx = x + n * 170
        parts.append(f"<rect x='{lx}' y='{legend_y - 10}' width='12' height='12' "
                     f"fill='{colour}'/>")  # fmt: skip
        parts.append(f"<text x='{lx + 18}' y='{legend_y}'>{escape(name)}</text>")
    return parts


def _number(value: float) -> str:
    if not math.isfinite(value):
        return "-"
    if value >= 1000 and value == int(value):
        return f"{value:,.0f}"
    return f"{value:.0f}" if abs(value) >= 10 or value == int(value) else f"{value:.1f}"
