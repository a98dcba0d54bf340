"""Charts as inline SVG strings: no scripts, no fonts to fetch, scale with the page."""

from __future__ import annotations

from collections.abc import Sequence
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


def _tick_label(label: str) -> str:
    """``2026-12-01T03:00:00Z`` -> ``12-01 03:00``."""
    return label[5:16].replace("T", " ") if len(label) >= 16 else label


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
    """Several series over shared time labels: axes with ticks and units, one point per
    night, a legend. Fewer than two nights draw no frame: a sentence says what there is."""
    labels = sorted({label for _, points in series for label, _ in points})
    values = [v for _, points in series for _, v in points]
    if not labels or not values:
        return f'<p class="note muted">{escape(title)}: no runs in the window.</p>'
    if len(labels) < 2:
        each = ", ".join(
            f"{escape(name)} {escape(y_format.format(points[-1][1]))}"
            for name, points in series
            if points
        )
        return (
            f'<p class="note" id="single-night">One night so far ({escape(labels[0][:10])}): '
            f"{each}. The chart over nights appears from the second night.</p>"
        )
    low = min(values) if y_min is None else y_min
    high = max(values) if y_max is None else y_max
    position = {label: i for i, label in enumerate(labels)}
    left, right, top, bottom = 56, 12, 12, 52
    legend_rows = (len(series) + 3) // 4
    height += 16 * legend_rows
    plot_w, plot_h = width - left - right, height - top - bottom - 16 * legend_rows
    x0, y0 = left, top + plot_h  # the origin
    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" aria-label="{escape(title)}"><title>{escape(title)}</title>',
        f'<line x1="{x0}" y1="{y0}" x2="{x0 + plot_w}" y2="{y0}" stroke="#666"/>',
        f'<line x1="{x0}" y1="{top}" x2="{x0}" y2="{y0}" stroke="#666"/>',
    ]
    for step in range(5):  # y ticks and grid lines
        value = low + (high - low) * step / 4
        y = y0 - plot_h * step / 4
        parts.append(
            f'<line x1="{x0 - 4}" y1="{y:.1f}" x2="{x0 + plot_w}" y2="{y:.1f}" '
            f'stroke="{"#666" if step == 0 else "#e5e5e5"}"/>'
            f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(y_format.format(value))}</text>"
        )
    every = max(1, len(labels) // 8)  # x ticks: at most about 8 labels
    xs_all = _scale(list(range(len(labels))), 0, len(labels) - 1, plot_w, 10)
    for index, label in enumerate(labels):
        x = x0 + xs_all[index]
        parts.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + 4}" stroke="#666"/>')
        if index % every == 0 or index == len(labels) - 1:
            parts.append(
                f'<text x="{x:.1f}" y="{y0 + 16}" text-anchor="middle">'
                f"{escape(_tick_label(label))}</text>"
            )
    parts.append(
        f'<text x="{x0 + plot_w / 2:.1f}" y="{y0 + 34}" text-anchor="middle">'
        f"{escape(x_label)}</text>"
        f'<text transform="translate(14 {top + plot_h / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_label)}</text>'
    )
    for index, (name, points) in enumerate(series):
        colour = PALETTE[index % len(PALETTE)]
        xs = [x0 + xs_all[position[label]] for label, _ in points]
        ys = [y0 - y for y in _scale([v for _, v in points], low, high, plot_h, 0)]
        coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys, strict=True))
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{coords}">'
            f"<title>{escape(name)}</title></polyline>"
        )
        for x, y, (label, value) in zip(xs, ys, points, strict=True):
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}">'
                f"<title>{escape(name)} {escape(label)}: "
                f"{escape(y_format.format(value))}</title></circle>"
            )
        lx = x0 + 175 * (index % 4)
        ly = y0 + 50 + 16 * (index // 4)
        parts.append(
            f'<circle cx="{lx + 5}" cy="{ly - 4}" r="4" fill="{colour}"/>'
            f'<text x="{lx + 14}" y="{ly}" class="legend">{escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


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
