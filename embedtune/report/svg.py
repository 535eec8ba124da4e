"""The report's two kinds of plot as inline SVG text: a line (the loss) and a labelled scatter (the map).

Hand-written rather than a plotting library's: two small plots, no new dependency, and the page
stays one file that needs nothing at view time.
"""

from __future__ import annotations

from html import escape

import numpy as np

GREY, INK, BLUE, ORANGE = "#9aa0a6", "#202124", "#1a73e8", "#e8710a"


def _nice(x: float) -> str:
    return f"{x:.4g}"


def line_chart(values: list[float], *, width: int = 640, height: int = 220, x_label: str = "",
               y_label: str = "", css_class: str = "plot") -> str:
    """A line through ``values`` (at 0, 1, 2, ...), with the first, last, lowest and highest labelled."""
    pad_l, pad_r, pad_t, pad_b = 64, 16, 12, 36
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    ys = np.asarray(values, np.float64)
    low, high = float(ys.min()), float(ys.max())
    if high == low:
        low, high = low - 0.5 * abs(low or 1), high + 0.5 * abs(high or 1)
    n = len(ys)

    def x(i):
        return pad_l + (w * i / (n - 1) if n > 1 else w / 2)

    def y(v):
        return pad_t + h * (high - v) / (high - low)

    points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(ys))
    parts = [_open(width, height, css_class),
             f'<rect x="{pad_l}" y="{pad_t}" width="{w}" height="{h}" fill="none" stroke="{GREY}"/>',
             f'<polyline class="series" points="{points}" fill="none" stroke="{BLUE}" stroke-width="2"/>']
    parts += [f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="2.5" fill="{BLUE}"/>' for i, v in enumerate(ys)]
    for v in sorted({high, low}):
        parts.append(f'<text x="{pad_l - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{_nice(v)}</text>')
    parts.append(f'<text x="{pad_l}" y="{height - 18}" text-anchor="start">1</text>')
    parts.append(f'<text x="{pad_l + w}" y="{height - 18}" text-anchor="end">{n}</text>')
    parts.append(f'<text x="{pad_l + w / 2}" y="{height - 4}" text-anchor="middle">{escape(x_label)}</text>')
    parts.append(f'<text x="14" y="{pad_t + h / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {pad_t + h / 2})">{escape(y_label)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def scatter(points: np.ndarray, labels: list[str], chosen: np.ndarray, bounds: tuple, *, title: str = "",
            trails: np.ndarray | None = None, width: int = 460, height: int = 460, css_class: str = "map") -> str:
    """Labelled points: ``chosen`` ones large and coloured, the rest grey. Rows of ``points`` with NaN
    are not drawn. ``bounds``: (x_low, x_high, y_low, y_high), shared by the plots compared.
    ``trails``: [n, 2] where each point was before (NaN: nowhere), a faint line from there."""
    pad = 14
    x0, x1, y0, y1 = bounds
    sx = (width - 2 * pad) / ((x1 - x0) or 1.0)
    sy = (height - 2 * pad - 18) / ((y1 - y0) or 1.0)

    def at(p):
        return pad + (p[0] - x0) * sx, pad + 18 + (y1 - p[1]) * sy

    parts = [_open(width, height, css_class),
             f'<rect x="0.5" y="0.5" width="{width - 1}" height="{height - 1}" fill="none" stroke="{GREY}"/>',
             f'<text x="{pad}" y="{pad + 4}" font-weight="bold">{escape(title)}</text>']
    if trails is not None:
        for p, q, c in zip(trails, points, chosen):
            if c and np.isfinite(p).all() and np.isfinite(q).all():
                (ax, ay), (bx, by) = at(p), at(q)
                parts.append(f'<line x1="{ax:.1f}" y1="{ay:.1f}" x2="{bx:.1f}" y2="{by:.1f}" stroke="{ORANGE}" '
                             f'stroke-opacity="0.5" stroke-dasharray="3 2"/>')
    order = np.argsort(chosen, kind="stable")   # the chosen words drawn last, on top
    for i in order:
        p = points[i]
        if not np.isfinite(p).all():
            continue
        cx, cy = at(p)
        if chosen[i]:
            parts.append(f'<circle class="word chosen" cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{ORANGE}"/>')
            parts.append(f'<text x="{cx + 6:.1f}" y="{cy + 4:.1f}" fill="{INK}" font-weight="bold">'
                         f'{escape(labels[i])}</text>')
        else:
            parts.append(f'<circle class="word" cx="{cx:.1f}" cy="{cy:.1f}" r="2.5" fill="{GREY}"/>')
            parts.append(f'<text x="{cx + 4:.1f}" y="{cy + 3:.1f}" fill="#5f6368" font-size="10">'
                         f'{escape(labels[i])}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def shared_bounds(*arrays: np.ndarray, margin: float = 0.08) -> tuple[float, float, float, float]:
    """(x_low, x_high, y_low, y_high) around every finite point of ``arrays``, with a margin."""
    pts = np.concatenate([a[np.isfinite(a).all(axis=1)] for a in arrays])
    if not len(pts):
        return -1.0, 1.0, -1.0, 1.0
    (x0, y0), (x1, y1) = pts.min(axis=0), pts.max(axis=0)
    dx, dy = (x1 - x0) or 1.0, (y1 - y0) or 1.0
    # Room on the right for the labels.
    return x0 - margin * dx, x1 + 3 * margin * dx, y0 - margin * dy, y1 + margin * dy


def _open(width: int, height: int, css_class: str) -> str:
    return (f'<svg class="{css_class}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11" role="img">')

