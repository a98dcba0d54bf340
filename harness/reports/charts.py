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


def line_chart(
    series: Sequence[tuple[str, Sequence[tuple[str, float]]]],
    *,
    title: str,
    width: int = 640,
    height: int = 220,
    y_min: float | None = None,
    y_max: float | None = None,
    y_format: str = "{:.0%}",
) -> str:
    """Several series over shared time labels; a legend names each one."""
    labels = sorted({label for _, points in series for label, _ in points})
    values = [v for _, points in series for _, v in points]
    if not labels or not values:
        return f'<svg class="chart" role="img" aria-label="{escape(title)}: no data"></svg>'
    low = min(values) if y_min is None else y_min
    high = max(values) if y_max is None else y_max
    position = {label: i for i, label in enumerate(labels)}
    left, bottom = 48, 28
    parts = [
        f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" aria-label="{escape(title)}"><title>{escape(title)}</title>',
        f'<line x1="{left}" y1="{height - bottom}" x2="{width}" y2="{height - bottom}" '
        'stroke="#999"/>',
        f'<line x1="{left}" y1="0" x2="{left}" y2="{height - bottom}" stroke="#999"/>',
        f'<text x="2" y="12" font-size="10">{escape(y_format.format(high))}</text>',
        f'<text x="2" y="{height - bottom}" font-size="10">{escape(y_format.format(low))}</text>',
        f'<text x="{left}" y="{height - 8}" font-size="10">{escape(labels[0][:10])}</text>',
        f'<text x="{width - 70}" y="{height - 8}" font-size="10">{escape(labels[-1][:10])}</text>',
    ]
    plot_w, plot_h = width - left, height - bottom
    for index, (name, points) in enumerate(series):
        colour = PALETTE[index % len(PALETTE)]
        xs = _scale([position[label] for label, _ in points], 0, max(len(labels) - 1, 1), plot_w, 6)
        ys = _scale([v for _, v in points], low, high, plot_h, 6)
        coords = " ".join(f"{left + x:.1f},{plot_h - y:.1f}" for x, y in zip(xs, ys, strict=True))
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" '
            f'points="{coords}"><title>{escape(name)}</title></polyline>'
        )
        for x, y, (label, value) in zip(xs, ys, points, strict=True):
            parts.append(
                f'<circle cx="{left + x:.1f}" cy="{plot_h - y:.1f}" r="2.5" '
                f'fill="{colour}"><title>{escape(name)} {escape(label)}: '
                f"{escape(y_format.format(value))}</title></circle>"
            )
        parts.append(
            f'<text x="{left + 8 + 110 * (index % 5)}" y="{12 + 12 * (index // 5)}" '
            f'font-size="10" fill="{colour}">{escape(name)}</text>'
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
