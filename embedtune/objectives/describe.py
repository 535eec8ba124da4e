"""What `embedtune train` says, a line each: the dry run's report, from its description (plain data,
the --json of the dry run), and the lines after a run, from its result. An objective points to its own
text (``Objective.describe``): the loop's objectives share ``Describe``'s; classify adds its classifier's
and --valid's lines (classify/describe.py); retrofit, fitted in closed form, has its own (retrofit.py).
"""

from __future__ import annotations

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
                                   for k, v in d["memory_parts_bytes"].items() if v) + ")"
                       + (f"; and {d['memory_mapped_bytes'] / mib:,.0f} MiB of the model's file pages, mapped "
                          "(the system takes them back as it needs)" if d.get("memory_mapped_bytes") else "")),
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
