"""What `embedtune train` says, a line each: the dry run's report, from its description (plain data,
the --json of the dry run), and the lines after a run, from its result. An objective points to its own
text (``Objective.describe``): the loop's objectives share ``Describe``'s; classify adds its classifier's
and --valid's lines; retrofit, fitted in closed form, has its own. Imports nothing of the objectives.
"""

from __future__ import annotations

from typing import Any, ClassVar

from embedtune.errors import counted


class Describe:
    """The text of a run of the training loop (embedtune/run.py asks it through ``Objective.describe``)."""

    @classmethod
    def dry_run_lines(cls, d: dict, config) -> list[str]:
        """The dry run's report, a line each, from its description ``d`` (``dry_run``'s, with ``to``
        and ``lowercase`` added)."""
        settings = ", ".join(f"{key} {value:g}" if isinstance(value, float) else f"{key} {value}"
                             for key, value in d["settings"].items())
        limits = [counted(d[k], k.split('_')[1][:-1]) for k in ("max_steps", "max_words") if d[k]]
        mib, workers = 2**20, d["workers"]
        lines = [
            ("vectors", f"{d['vectors']} ({d['format']}, {counted(d['rows'], 'row')}, {counted(d['dim'], 'dimension')})"),
            ("corpus", f"{d['corpus']} ({counted(d['corpus_words'], 'word')}, {counted(d['corpus_lines'], 'line')}, "
                       f"{d['distinct_words']:,} distinct{', lower-cased' if d['lowercase'] else ''})"),
            ("output", f"{d['output']} ({d['to']})"),
            ("rows", f"{d['frozen']:,} frozen, {d['trainable']:,} trainable, {d['new']:,} new; in the corpus: "
                     f"{d['trainable_in_corpus']:,} to train, {d['frozen_in_corpus']:,} frozen"),
            *[("missing", f"{counted(m['count'], 'word')} of {path} {'is' if m['count'] == 1 else 'are'} not in the "
                          f"vocabulary (first: {', '.join(m['first'])})")
              for path, m in d["missing_list_words"].items()],
            *[("note", text) for text in d.get("notes", ())],
            ("new words", f"start: {d['init']}" if d["new"] else "none"),
            ("objective", f"{d['objective']}: {settings}"),
            ("stop", f"after {' or '.join(limits)}" if limits else f"after {counted(d['settings']['epochs'], 'epoch')}"),
            ("memory", f"about {d['memory_estimate_bytes'] / mib:,.0f} MiB at the peak "
                       + (f"in all: {workers} worker processes of {d['memory_per_worker_bytes'] / mib:,.0f} MiB "
                          f"each and the launcher's {d['memory_launcher_bytes'] / mib:,.0f} " if workers > 1 else "")
                       + "(an estimate from the table sizes, MiB" + (" a worker" if workers > 1 else "") + ": "
                       + ", ".join(f"{k.replace('_', ' ')} {v / mib:,.1f}"
                                   for k, v in d["memory_parts_bytes"].items() if v) + ")"),
        ]
        return [f"{name:<10} {value}" for name, value in lines]

    @classmethod
    def report_lines(cls, result, config) -> list[str]:
        """What the command says after a run, a line each (notes start with "Note: "), from
        ``result`` (embedtune.run.RunResult: its ``stats`` are the --json summary)."""
        s = result.stats
        over = f"{counted(s['epochs'], 'epoch')} of {counted(s['corpus_words'], 'word')}"
        if s["stopped_at_limit"]:
            limit = s["stopped_at_limit"]
            over = (f"{counted(s['steps'], 'step')}, {s['words_done']:,} of {counted(s['corpus_words'] * s['epochs'], 'word')} "
                    f"(stopped at --{limit.replace('_', '-')} {getattr(config.train, limit):,})")
        lines = [
            f"Trained {counted(s['trained_rows'], 'row')} ({s['new']:,} new) with {s['objective']} over {over}: "
            f"{s['words_per_second']:,} words/s, {s['train_seconds']:.1f} s "
            f"({s['total_seconds']:.1f} s with counting and starts); "
            f"loss {s['loss_first']:.4f} -> {s['loss_last']:.4f}; "
            f"{counted(s['frozen_rows_checked'], 'frozen row')} read back from the output as written: "
            f"{'bit-identical' if s['frozen_rows_checked'] == 1 else 'all bit-identical'} to the input as read"]
        if s["new"]:
            spelling = (f"{s['new_from_spelling_only']:,} had too few contexts and started from their spelling "
                        "alone, " if s["init"] == "form-context" else "")
            lines.append(f"New words: {s['new_from_context']:,} started from their contexts ({s['init']}), "
                         f"{spelling}{s['new_too_few_contexts']:,} had too few contexts and started random")
        if s.get("init_note"):
            lines.append(f"Note: {s['init_note']}")
        if config.output != "-":
            lines.append(f"Wrote {counted(len(result.vectors), 'vector')} to {config.output}")
        return lines


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


class RetrofitDescribe(Describe):
    """retrofit's: the lexicons read, its rounds and the largest changes (no corpus, no loop). ``files``:
    retrofit's top-level keys (the lexicons' names), set by its module's subclass."""

    files: ClassVar[Any]

    @classmethod
    def dry_run_lines(cls, d: dict, config) -> list[str]:
        lines = [f"{'rows':<10} {d['frozen']:,} frozen, {d['trainable']:,} trainable"]
        files = config.keys_of(cls.files)
        for key in ("lexicon", "antonyms"):
            lex = d[key]
            if lex is not None:
                lines.append(f"{key:<10} {getattr(files, key)}: {lex['lines']:,} lines, {lex['pairs_in_vectors']:,} "
                             f"pairs in the vectors, {lex['words_not_in_vectors']:,} words not in the vectors")
        s = d["settings"]
        lines.append(f"{'objective':<10} retrofit: {s['epochs']} rounds, anchor {s['anchor']:g}"
                     + (f", repel {s['repel']:g}" if d["antonyms"] else "")
                     + (f", keep {s['keep']:g}" if s.get("keep") else ""))
        return lines

    @classmethod
    def report_lines(cls, result, config) -> list[str]:
        s, files = result.stats, config.keys_of(cls.files)
        lines = []
        for key in ("lexicon", "antonyms"):
            lex = s[key]
            if lex is None:
                continue
            lines.append(f"{getattr(files, key)}: {counted(lex['lines'], 'line')}, {counted(lex['words'], 'word')}, "
                         f"{counted(lex['pairs_in_vectors'], 'pair')} in the vectors; "
                         f"{counted(lex['words_not_in_vectors'], 'word')} not in the vectors (not added)"
                         + (f", first: {', '.join(lex['first_not_in_vectors'])}" if lex["first_not_in_vectors"] else ""))
        lines.append(f"Retrofitted {counted(s['trained_rows'], 'row')} in {counted(s['epochs'], 'round')} (anchor {s['anchor']:g}"
                     + (f", repel {s['repel']:g}" if s["repel"] is not None else "")
                     + (f", keep {s['keep']:g}" if s.get("keep") else "") + f"), {s['train_seconds']:.2f} s; "
                     f"largest change in the last round: {s['round_changes'][-1]:.2g}; "
                     f"largest change on a frozen row: {s['max_frozen_change']}")
        if config.output != "-":
            lines.append(f"Wrote {counted(len(result.vectors), 'vector')} to {config.output}")
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
