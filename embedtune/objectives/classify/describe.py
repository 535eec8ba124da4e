"""What classify's run says after the loop's lines: its classifier, and --valid's figures before and after."""

from __future__ import annotations

from typing import Any, ClassVar

from embedtune.errors import counted
from embedtune.objectives.describe import Describe


class ClassifyDescribe(Describe):
    """classify's: the run's lines, then its classifier's and --valid's. ``files``: classify's top-level
    keys (--save-classifier's name), set by its module's subclass."""

    files: ClassVar[Any]

    @classmethod
    def report_lines(cls, result, config) -> list[str]:
        """The run's lines, then labels, skipped lines, --valid before and after, the classifier written."""
        lines = super().report_lines(result, config)
        s = result.stats
        lines.append(f"Classifier: {counted(s['labels'], 'label')} ({s['loss_kind']}), {s['train_lines']:,} "
                     "training lines"
                     + (f", {counted(s['train_lines_no_known_word'], 'line')} with no known word skipped"
                        if s["train_lines_no_known_word"] else "")
                     + (f", {counted(s['ngram_rows'], 'n-gram row')} (up to {s['word_ngrams']} words)"
                        if s["ngram_rows"] else ""))
        lines += valid_lines(s)
        path = config.keys_of(cls.files).save_classifier
        if path:
            lines.append(f"Wrote the classifier to {path}")
        return lines


def valid_lines(s: dict) -> list[str]:
    """The report's lines about --valid from the run's figures ``s``: before and after, and a note."""
    v = s["valid"]
    if v is None:
        return []

    def figure(f):
        if f["accuracy"] is None:
            return "no line"
        r1 = (f"; P@1 {f['precision_at_1']:.4f}, R@1 {f['recall_at_1']:.4f}"
              if s["loss_kind"] == "one-vs-all" else "")
        return f"{f['accuracy']:.4f}{r1}"
    lines = [f"Valid {v['path']} ({v['after']['lines']:,} lines): accuracy before {figure(v['before'])} "
             f"(classifier alone), after {figure(v['after'])}"]
    if note := valid_note(s):
        lines.append(f"Note: {note}")
    return lines


def valid_note(figures: dict) -> str | None:
    """A note for --valid lines skipped because none of their labels was seen in training."""
    v = figures.get("valid")
    if not v or not v["lines_unseen_labels"]:
        return None
    return (f"{counted(v['lines_unseen_labels'], 'line')} of {v['path']} (first: line {v['first_line_unseen_labels']}) "
            "had only labels the training lines never have; skipped, as fastText's test does")
