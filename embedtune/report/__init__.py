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


__all__ = ["Report", "RunInfo", "build_report", "from_run", "from_summary", "write_report"]
