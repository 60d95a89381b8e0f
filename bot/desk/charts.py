"""An inline SVG line chart (no plotting library, no script: the page's CSP allows neither)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

# Presentation attributes, not style="": the CSP has no 'unsafe-inline' for styles.
COLORS = ("#1f5fa8", "#c0392b", "#2e8b57")


def line_chart(labels: Sequence[str], series: dict[str, Sequence[float | None]], *, title: str,
               unit: str = "ms", budget: float | None = None, width: int = 720, height: int = 260) -> str:
    """One SVG: a line per series over ``labels`` (gaps where a value is None), a dashed budget line."""
    left, right, top, bottom = 56, 16, 28, 36
    w, h = width - left - right, height - top - bottom
    values = [v for s in series.values() for v in s if v is not None]
    peak = max([*values, budget or 0, 1.0]) * 1.1
    n = max(len(labels), 2)
    x = lambda i: left + w * i / (n - 1)
    y = lambda v: top + h - h * v / peak
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" role="img" '
           f'aria-label="{escape(title)}"><title>{escape(title)}</title>',
           f'<text x="{left}" y="18" font-size="13" fill="#222">{escape(title)}</text>']
    for k in range(5):  # grid and axis labels
        tick = peak * k / 4
        out.append(f'<line x1="{left}" x2="{left + w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#e3e3e3"/>'
                   f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" font-size="11" text-anchor="end" fill="#555">'
                   f'{tick:.0f}</text>')
    step = max(1, len(labels) // 8)
    for i, label in enumerate(labels):
        if i % step == 0 or i == len(labels) - 1:
            out.append(f'<text x="{x(i):.1f}" y="{top + h + 18}" font-size="11" text-anchor="middle" '
                       f'fill="#555">{escape(label)}</text>')
    if budget:
        out.append(f'<line x1="{left}" x2="{left + w}" y1="{y(budget):.1f}" y2="{y(budget):.1f}" stroke="#888" '
                   f'stroke-dasharray="5 4"/><text x="{left + w}" y="{y(budget) - 4:.1f}" font-size="11" '
                   f'text-anchor="end" fill="#555">예산 {budget:.0f} {escape(unit)}</text>')
    for vals, color in zip(series.values(), COLORS):
        path, pen_down = [], False
        for i, v in enumerate(vals):
            if v is None:
                pen_down = False
                continue
            path.append(f"{'L' if pen_down else 'M'}{x(i):.1f},{y(v):.1f}")
            out.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="2.5" fill="{color}"/>')
            pen_down = True
        if path:
            out.append(f'<path d="{" ".join(path)}" fill="none" stroke="{color}" stroke-width="2"/>')
    for k, (name, color) in enumerate(zip(series, COLORS)):
        lx = left + 8 + k * 120
        out.append(f'<rect x="{lx}" y="{top + 4}" width="12" height="3" fill="{color}"/>'
                   f'<text x="{lx + 16}" y="{top + 9}" font-size="11" fill="#222">{escape(name)}</text>')
    out.append("</svg>")
    return "".join(out)
