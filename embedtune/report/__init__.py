"""A report of what a fine-tune did: one HTML page (``embedtune report``, ``train --report``) and
TensorBoard's projector files (``train --logdir``).

    run_info.py    what the run recorded: its settings, summary, the new words' contexts
    content.py     what the page shows, computed from BEFORE and AFTER (embedtune.compare)
    projection.py  the 2-D map (PCA)
    svg.py, page.py  the plots and the page
    projector.py   TensorBoard's projector files
"""

from __future__ import annotations

from embedtune.report.content import Report, build_report
from embedtune.report.run_info import RunInfo, from_run, from_summary


def write_report(report: Report, path: str) -> None:
    """The page at ``path``, written to a temporary file and renamed into place."""
    from embedtune.formats.io import open_target
    from embedtune.report.page import render

    text = render(report).encode("utf-8")
    with open_target(path) as f:
        f.write(text)


def after_run(out, before, init=None) -> dict:
    """What a finished run (embedtune.run.RunResult ``out``, its output written) adds: TensorBoard's
    projector files in ``--logdir`` and the page at ``--report``. ``before``: the input vectors;
    ``init``: the new words' embedding.init.InitResult. Returns the seconds each took."""
    import time

    from embedtune.report.projector import projector_rows, write_projector

    config, seconds = out.config, {}
    run = from_run(out, init)
    if config.train.logdir:
        began = time.perf_counter()
        write_projector(config.train.logdir, projector_rows(before, out.vectors, run.new_contexts))
        seconds["projector"] = time.perf_counter() - began
    if config.report:
        began = time.perf_counter()
        report = build_report(before, out.vectors, before_path=config.vectors, after_path=config.output, run=run)
        write_report(report, config.report)
        seconds["report"] = time.perf_counter() - began
    return seconds


__all__ = ["Report", "RunInfo", "after_run", "build_report", "from_run", "from_summary", "write_report"]
