"""The report as one self-contained HTML page: inline CSS and SVG, no script, nothing fetched."""

from __future__ import annotations

from html import escape

from embedtune.compare import format_score
from embedtune.report.content import Report
from embedtune.report.svg import line_chart, scatter, shared_bounds
from embedtune.training.batches import LOSS_EVERY

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1040px; color: #202124; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #dadce0; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.92em; }
th, td { padding: 3px 10px; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, pre { background: #f1f3f4; padding: 1px 4px; border-radius: 3px; }
pre { padding: 8px; white-space: pre-wrap; word-break: break-all; }
.ok { color: #137333; font-weight: bold; } .bad { color: #c5221f; font-weight: bold; }
.up { color: #137333; } .down { color: #c5221f; } .muted { color: #5f6368; }
.gained { font-weight: bold; } .maps, .row { display: flex; gap: 24px; flex-wrap: wrap; align-items: flex-start; }
details { margin: 0.5em 0; }
"""


def render(report: Report) -> str:
    """The page's HTML text."""
    r = report
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>embedtune report: {escape(r.after_path)}</title>", f"<style>{CSS}</style></head><body>",
             "<h1>What the fine-tune did</h1>",
             f'<p class="muted">before: <code>{escape(r.before_path)}</code> ({_shape(r.before_shape)}) &nbsp; '
             f'after: <code>{escape(r.after_path)}</code> ({_shape(r.after_shape)})</p>']
    parts += _run(r) + _frozen(r) + _scores(r) + _moved(r) + _new(r) + _map(r)
    took = ", ".join(f"{k} {v:.1f} s" for k, v in r.seconds.items())
    parts.append(f'<p class="muted">Made by <code>embedtune report</code> in {took}.</p></body></html>')
    return "\n".join(parts) + "\n"


def _shape(shape) -> str:
    return f"{shape[0]:,} words x {shape[1]}"


def _table(head: list[str], rows: list[list[str]], numeric: set[int] = frozenset()) -> str:
    """Cells are HTML already (escaped by the caller)."""
    th = "".join(f'<th class="num">{h}</th>' if i in numeric else f"<th>{h}</th>" for i, h in enumerate(head))
    body = ["<tr>" + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
                             for i, c in enumerate(row)) + "</tr>" for row in rows]
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _run(r: Report) -> list[str]:
    out = ['<section id="run"><h2>The run</h2>']
    run = r.run
    if run is None:
        out.append('<p class="muted">No run given: <code>embedtune train ... --json run.json</code> records one, '
                   "and <code>embedtune report BEFORE AFTER --run run.json</code> shows it here.</p>")
        return out + ["</section>"]
    s = run.stats
    if run.command:
        out.append(f"<pre>{escape(run.command)}</pre>")
    out.append('<div class="row"><div>')
    rows = [[escape(k), f"{s.get(k, 0):,}"] for k in ("frozen", "trainable", "new") if k in s]
    out.append(_table(["rows", "count"], rows, {1}))
    seconds = s.get("seconds") or {}
    if seconds or "total_seconds" in s:
        cells = [[escape(k), f"{v:.1f}"] for k, v in seconds.items()]
        if "total_seconds" in s:
            cells.append(["<b>total</b>", f"<b>{s['total_seconds']:.1f}</b>"])
        out.append(_table(["time", "seconds"], cells, {1}))
    out.append("</div>")
    history = run.loss_history
    out.append('<div id="loss">')
    if history:
        out.append(line_chart(history, x_label=f"reading (every {LOSS_EVERY} steps and at each epoch's end; "
                                                 f"{s.get('steps', '?')} steps in all)",
                              y_label="loss per pair", css_class="plot loss"))
        out.append(f'<p class="muted">{history[0]:.5g} at the first reading, {history[-1]:.5g} at the last.</p>')
    else:
        out.append('<p class="muted">The run recorded no loss (a closed-form objective, or no step).</p>')
    out.append("</div></div>")
    details = "".join(f"<tr><td>{escape(k)}</td><td>{escape(v)}</td></tr>" for k, v in run.settings)
    out.append(f"<details><summary>Settings ({len(run.settings)})</summary><table>{details}</table></details>")
    return out + ["</section>"]


def _frozen(r: Report) -> list[str]:
    d = r.diff
    out = ['<section id="frozen"><h2>Frozen rows</h2>']
    s = r.run.stats if r.run else {}
    if "frozen_rows_checked" in s:
        worst = s.get("max_frozen_change")
        good = worst == 0.0
        verdict = '<span class="ok">bit-identical</span>' if good else f'<span class="bad">changed ({worst})</span>'
        out.append(f"<p>The run read {s['frozen_rows_checked']:,} frozen rows back from the file it wrote: "
                   f"{verdict} to the input.</p>")
    if r.frozen is not None:
        f = r.frozen
        bad = len(f.changed) + len(f.removed)
        verdict = ('<span class="ok">all bit-identical</span>' if f.ok else
                   f'<span class="bad">{bad} changed or removed</span> (first: '
                   f'{escape(", ".join((f.changed + f.removed)[:10]))})')
        out.append(f"<p>Checked here: {f.checked:,} frozen words of BEFORE against AFTER: {verdict}.</p>")
    rows = [["bit-identical", f"{d.identical:,}"], ["changed", f"{d.changed:,}"],
            ["added (new words)", f"{d.added:,}"], ["removed", f"{d.removed:,}"]]
    out.append("<p>Every row of BEFORE compared with AFTER, bit for bit:</p>" + _table(["rows", "count"], rows, {1}))
    if d.changed:
        out.append(f'<p class="muted">Changed rows moved {d.l2_mean:.4g} on average (L2; largest {d.l2_max:.4g}), '
                   f"cosine to where they were {d.cosine_mean:.4g} on average (lowest {d.cosine_min:.4g}).</p>")
    return out + ["</section>"]


def _scores(r: Report) -> list[str]:
    out = ['<section id="benchmarks"><h2>Benchmarks before and after</h2>']
    head, rest = [], []
    for row in r.scores:
        m, change = row["metric"], row["change"]
        cls = "" if not change else ("up" if (change > 0) != m.endswith("oov_ratio") else "down")
        cells = [escape(row["benchmark"]), escape(m), format_score(m, row["before"]), format_score(m, row["after"]),
                 f'<span class="{cls}">{format_score(m, change, signed=True)}</span>']
        # The headline: each set's correlation or overall accuracy; out-of-vocabulary shares and the
        # analogy sections are folded below it.
        (rest if m.endswith("oov_ratio") or ": " in row["benchmark"] else head).append(cells)
    columns = ["benchmark", "metric", "before", "after", "change"]
    if not r.scores:
        out.append('<p class="muted">No benchmark was run.</p>')
    out.append(_table(columns, head, {2, 3, 4}) if head else "")
    if rest:
        out.append(f"<details><summary>Out-of-vocabulary shares and analogy sections ({len(rest)})</summary>"
                   f"{_table(columns, rest, {2, 3, 4})}</details>")
    out.append(f'<p class="muted">Analogies among the first {r.restrict_vocab:,} words (3CosAdd, as '
               "<code>embedtune eval</code>).</p>")
    return out + ["</section>"]


def _words(pairs, other=None) -> str:
    """Neighbours as 'word (0.81)', those absent from ``other`` in bold."""
    seen = {w for w, _ in other} if other is not None else None
    cells = []
    for w, c in pairs:
        text = f"{escape(w)} <span class=\"muted\">{c:.2f}</span>"
        cells.append(f'<span class="gained">{text}</span>' if seen is not None and w not in seen else text)
    return ", ".join(cells) or '<span class="muted">-</span>'


def _moved(r: Report) -> list[str]:
    out = ['<section id="moved"><h2>The pretrained words that moved most</h2>']
    if not r.moved:
        return out + ['<p class="muted">No pretrained row changed.</p></section>']
    rows = [[f"<b>{escape(m.moved.word)}</b>", f"{m.moved.l2:.4f}", f"{m.moved.cosine:.3f}", _words(m.before),
             _words(m.after, m.before)] for m in r.moved]
    out.append(_table(["word", "moved (L2)", "cosine to before", "neighbours before", "neighbours after "
                       "(bold: new among them)"], rows, {1, 2}))
    return out + ["</section>"]


def _new(r: Report) -> list[str]:
    out = ['<section id="new"><h2>New words</h2>']
    if not r.n_new:
        return out + ['<p class="muted">AFTER has no word that BEFORE lacks.</p></section>']
    shown = f"the first {len(r.new)} of {r.n_new:,}" if len(r.new) < r.n_new else f"all {r.n_new:,}"
    out.append(f"<p>AFTER has {r.n_new:,} words BEFORE lacks; {shown}, with their nearest pretrained words:</p>")
    rows = []
    for n in r.new:
        start = {"contexts": "its contexts", "spelling": '<span class="bad">spelling only</span>',
                 "random": '<span class="bad">random</span>', None: '<span class="muted">not known</span>'}[n.start]
        contexts = "-" if n.contexts is None else f"{n.contexts:,}"
        rows.append([f"<b>{escape(n.word)}</b>", contexts, start, _words(n.neighbors)])
    out.append(_table(["word", "contexts", "started from", "nearest pretrained words"], rows, {1}))
    if r.run is None or not r.run.new_contexts:
        out.append('<p class="muted">Contexts are known when the page is made by <code>embedtune train '
                   "--report</code> (they are counted as the run starts the new words).</p>")
    return out + ["</section>"]


def _map(r: Report) -> list[str]:
    out = ['<section id="map"><h2>Map</h2>']
    m = r.map
    if m is None:
        return out + ['<p class="muted">No word to map.</p></section>']
    bounds = shared_bounds(m.before, m.after)
    out.append(f"<p>{int(m.chosen.sum())} words (orange) among their nearest neighbours (grey), on one PCA "
               f"plane for both sides ({100 * sum(m.explained):.0f}% of the points' variance); "
               "the dashed line runs from where a word was.</p>")
    out.append('<div class="maps">')
    out.append(scatter(m.before, m.words, m.chosen, bounds, title="before", css_class="map before"))
    out.append(scatter(m.after, m.words, m.chosen, bounds, title="after", trails=m.before, css_class="map after"))
    out.append("</div>")
    if m.missing:
        out.append(f'<p class="muted">Not in either file: {escape(", ".join(m.missing))}</p>')
    return out + ["</section>"]
