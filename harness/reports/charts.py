"""Charts as inline SVG strings: no scripts, no fonts to fetch, scale with the page."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#7f7f7f",
    "#bcbd22",
)


def _scale(
    values: Sequence[float], low: float, high: float, size: float, pad: float
) -> list[float]:
    span = (high - low) or 1.0
    return [pad + (size - 2 * pad) * (v - low) / span for v in values]


def _epoch(label: str) -> float:
    try:
        when = dt.datetime.fromisoformat(label.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def _tick_label(epoch: float, span: float) -> str:
    when = dt.datetime.fromtimestamp(epoch, dt.UTC)
    if span >= 2 * 86400:
        return when.strftime("%m-%d")
    return when.strftime("%m-%d %H:%M" if span >= 3600 else "%H:%M:%S")


def line_chart(
    series: Sequence[tuple[str, Sequence[tuple[str, float]]]],
    *,
    title: str,
    y_label: str,
    x_label: str,
    width: int = 720,
    height: int = 260,
    y_min: float | None = None,
    y_max: float | None = None,
    y_format: str = "{:.0%}",
) -> str:
    """Series of (ISO time, value) on a time axis: axes with ticks and units, one point per
    run, a legend. When no series has two points there is no line to draw: a sentence says
    what there is instead of an empty frame."""
    sentence = _no_line(series, title, y_format)
    if sentence is not None:
        return sentence
    values = [v for _, points in series for _, v in points]
    times = [_epoch(label) for _, points in series for label, _ in points]
    legend_rows = (len(series) + 3) // 4
    height += 16 * legend_rows
    frame = _Frame(low=min(values) if y_min is None else y_min,
                   high=max(values) if y_max is None else y_max,
                   t_min=min(times), t_max=max(times), top=12,
                   plot_w=width - 56 - 24, plot_h=height - 12 - 52 - 16 * legend_rows)
    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" aria-label="{escape(title)}"><title>{escape(title)}</title>',
        *_axes(frame, x_label, y_label, y_format),
    ]
    for index, (name, points) in enumerate(series):
        parts += _series(frame, index, name, points, y_format)
    parts.append("</svg>")
    return "".join(parts)


def _no_line(series: Sequence[tuple[str, Sequence[tuple[str, float]]]], title: str,
             y_format: str) -> str | None:
    """The sentence shown instead of a chart with no line to draw; None when there is one."""
    if not any(points for _, points in series):
        return f'<p class="note muted">{escape(title)}: no runs in the window.</p>'
    if max(len(points) for _, points in series) >= 2:
        return None
    first = min(label for _, points in series for label, _ in points)
    each = ", ".join(
        f"{escape(name)} {escape(y_format.format(points[-1][1]))}"
        for name, points in series
        if points
    )
    return (
        f'<p class="note" id="single-night">One night so far ({escape(first[:10])}): '
        f"{each}. The chart over nights appears from the second night.</p>"
    )


@dataclass(frozen=True, kw_only=True)
class _Frame:
    """A line chart's plot area: its value and time ranges and where it sits."""

    low: float
    high: float
    t_min: float
    t_max: float
    top: int
    plot_w: int
    plot_h: int
    x0: int = 56  # the origin: left margin ...

    @property
    def y0(self) -> int:  # ... and the bottom of the plot
        return self.top + self.plot_h

    def x_of(self, epoch: float) -> float:
        return self.x0 + _scale([epoch], self.t_min, self.t_max, self.plot_w, 10)[0]


def _axes(f: _Frame, x_label: str, y_label: str, y_format: str) -> list[str]:
    """Both axes, the y ticks with their grid lines, the x ticks evenly spaced in time."""
    x0, y0, plot_w, plot_h = f.x0, f.y0, f.plot_w, f.plot_h
    parts = [
        f'<line x1="{x0}" y1="{y0}" x2="{x0 + plot_w}" y2="{y0}" stroke="#666"/>',
        f'<line x1="{x0}" y1="{f.top}" x2="{x0}" y2="{y0}" stroke="#666"/>',
    ]
    for step in range(5):
        value = f.low + (f.high - f.low) * step / 4
        y = y0 - plot_h * step / 4
        parts.append(
            f'<line x1="{x0 - 4}" y1="{y:.1f}" x2="{x0 + plot_w}" y2="{y:.1f}" '
            f'stroke="{"#666" if step == 0 else "#e5e5e5"}"/>'
            f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(y_format.format(value))}</text>"
        )
    ticks, span = 6, f.t_max - f.t_min
    for step in range(ticks):
        epoch = f.t_min + span * step / (ticks - 1)
        x = f.x_of(epoch)
        parts.append(
            f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + 4}" stroke="#666"/>'
            f'<text x="{x:.1f}" y="{y0 + 16}" text-anchor="middle">'
            f"{escape(_tick_label(epoch, span))}</text>"
        )
    parts.append(
        f'<text x="{x0 + plot_w / 2:.1f}" y="{y0 + 34}" text-anchor="middle">'
        f"{escape(x_label)}</text>"
        f'<text transform="translate(14 {f.top + plot_h / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_label)}</text>'
    )
    return parts


def _series(f: _Frame, index: int, name: str, points: Sequence[tuple[str, float]],
            y_format: str) -> list[str]:
    """One series: its line, a point per run with its value, and its legend entry."""
    colour = PALETTE[index % len(PALETTE)]
    xs = [f.x_of(_epoch(label)) for label, _ in points]
    ys = [f.y0 - y for y in _scale([v for _, v in points], f.low, f.high, f.plot_h, 0)]
    coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys, strict=True))
    parts = [
        f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{coords}">'
        f"<title>{escape(name)}</title></polyline>"
    ]
    for x, y, (label, value) in zip(xs, ys, points, strict=True):
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}">'
            f"<title>{escape(name)} {escape(label)}: "
            f"{escape(y_format.format(value))}</title></circle>"
        )
    lx = f.x0 + 175 * (index % 4)
    ly = f.y0 + 50 + 16 * (index // 4)
    parts.append(
        f'<circle cx="{lx + 5}" cy="{ly - 4}" r="4" fill="{colour}"/>'
        f'<text x="{lx + 14}" y="{ly}" class="legend">{escape(name)}</text>'
    )
    return parts


def sparkline(
    points: Sequence[tuple[str, float]],
    *,
    title: str,
    width: int = 120,
    height: int = 24,
    limit: float | None = None,
) -> str:
    """A small trend line; ``limit`` draws a reference line (e.g. headroom 1.0)."""
    if not points:
        return ""
    values = [v for _, v in points]
    low = min([*values, *([limit] if limit is not None else [])])
    high = max([*values, *([limit] if limit is not None else [])])
    xs = _scale(list(range(len(values))), 0, max(len(values) - 1, 1), width, 2)
    ys = _scale(values, low, high, height, 2)
    coords = " ".join(f"{x:.1f},{height - y:.1f}" for x, y in zip(xs, ys, strict=True))
    tips = "; ".join(f"{label[:10]}: {value:g}" for label, value in points)
    parts = [
        f'<svg class="spark" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img"><title>{escape(title)} — {escape(tips)}</title>'
    ]
    if limit is not None:
        y = height - _scale([limit], low, high, height, 2)[0]
        parts.append(
            f'<line x1="0" x2="{width}" y1="{y:.1f}" y2="{y:.1f}" stroke="#d62728" '
            'stroke-dasharray="3,2"/>'
        )
    parts.append(f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{coords}"/>')
    parts.append("</svg>")
    return "".join(parts)
