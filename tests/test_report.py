"""The report: the page `train --report` and `embedtune report` write, seen as a person sees it (rendered
by headless Chromium), and the projector files `--logdir` adds, read back by the format's rules.

One small real run (3,000 GloVe rows, 120 lines of the sample corpus, 60 steps) is shared by the module.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib

import numpy as np
import pytest
from click.testing import CliRunner

from embedtune.formats import load_vectors, save_vectors
from train_fixtures import glove, sample_lines

pytestmark = pytest.mark.xdist_group("test_report.py")   # one process builds the shared run

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SECTIONS = ("run", "frozen", "benchmarks", "moved", "new", "map")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run with --report and --logdir: {before, output, report, logdir, summary, result}."""
    from embedtune.config import from_options
    from embedtune.config import Config
    from embedtune.run import run

    folder = tmp_path_factory.mktemp("report")
    before = folder / "before.txt"
    save_vectors(glove(3000), str(before), "glove")
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(sample_lines(120)) + "\n", encoding="utf-8")
    paths = {"before": before, "output": folder / "after.txt", "report": folder / "report.html",
             "logdir": folder / "logs"}
    config = from_options({"freeze_top": 1000, "epochs": 1, "batch_size": 256, "max_steps": 60, "min_count": 2, "max_new": 40, "seed": 1},
                            Config(vectors=str(before), corpus=str(corpus), output=str(paths["output"]),
                                             report=str(paths["report"])))
    config = from_options({"logdir": str(paths["logdir"])}, config)
    result = run(config)
    (folder / "run.json").write_text(json.dumps(result.stats), encoding="utf-8")
    return {**paths, "summary": folder / "run.json", "result": result}


# --- the page, rendered ------------------------------------------------------------------------


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no chromium on this machine (Debian: apt-get install chromium; .ci/run installs it)")
    return path


def test_the_page_renders_with_every_section_and_plot(trained, tmp_path):
    """One render: the DOM Chromium built (every section there, with text; the loss line and both maps
    drawn) and a screenshot that is a picture, not a blank page."""
    shot = tmp_path / "page.png"
    done = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                           "--window-size=1100,2400", f"--screenshot={shot}", "--dump-dom",
                           trained["report"].as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    for name in SECTIONS:
        section = re.search(rf'<section id="{name}">(.*?)</section>', dom, re.S)
        assert section and len(re.sub(r"<[^>]+>", "", section.group(1)).strip()) > 20, name
    loss = re.search(r'<polyline class="series" points="([^"]+)"', dom)
    assert loss and len(loss.group(1).split()) == len(trained["result"].stats["loss_history"]) >= 2
    for side in ("before", "after"):
        svg = re.search(rf'<svg class="map {side}".*?</svg>', dom, re.S).group(0)
        assert svg.count('class="word chosen"') >= 2 and svg.count("<circle") >= 10, side
    assert "bit-identical" in dom and "1,000 frozen rows" in dom
    width, height, ink = png_ink(shot.read_bytes())
    assert (width, height) == (1100, 2400) and ink > 0.02   # a blank page: nothing but zeros once filtered


def png_ink(data: bytes) -> tuple[int, int, float]:
    """Width, height and the share of non-zero bytes in the filtered pixel rows of a PNG: a page of one
    colour filters to zeros (PNG's Sub and Up filters), anything drawn does not."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        size, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunks.setdefault(kind, []).append(data[pos + 8:pos + 8 + size])
        pos += 12 + size
    width, height = struct.unpack(">II", chunks[b"IHDR"][0][:8])
    rows = np.frombuffer(zlib.decompress(b"".join(chunks[b"IDAT"])), np.uint8)
    return width, height, float(np.count_nonzero(rows)) / len(rows)


# --- what the page holds -----------------------------------------------------------------------


def test_train_report_holds_the_run_the_rows_and_the_new_words_contexts(trained):
    page = trained["report"].read_text(encoding="utf-8")
    s = trained["result"].stats
    assert "embedtune train " in page and "--freeze-top 1000" in page
    assert f"{s['frozen']:,}" in page and f"{s['trainable']:,}" in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")   # nothing fetched
    new = re.search(r'<section id="new">(.*?)</section>', page, re.S).group(1)
    contexts = [int(n.replace(",", "")) for n in re.findall(r'<td class="num">([\d,]+)</td>', new)]
    assert contexts and all(n >= 1 for n in contexts)   # every new word of this run had contexts
    assert "not known" not in new


def test_the_report_command_makes_the_page_from_the_files(trained, tmp_path):
    from embedtune.cli.main import cli

    out = tmp_path / "r.html"
    words = tmp_path / "words.txt"
    words.write_text("the\nnews\nnot-a-word-here\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["report", str(trained["before"]), str(trained["output"]), "-o", str(out),
                                      "--run", str(trained["summary"]), "--words", str(words), "--top", "5", "-q"])
    assert result.exit_code == 0, result.output
    assert result.stdout == ""   # standard output carries data only: there is none
    page = out.read_text(encoding="utf-8")
    assert page.count('<tr><td><b>') >= 5 and "Not in either file: not-a-word-here" in page
    assert re.search(r'class="word chosen"[^>]*>\s*<text[^>]*>the<', page)


def test_the_report_command_fails_when_a_frozen_word_moved(trained, tmp_path):
    from embedtune.cli.main import cli

    after = load_vectors(str(trained["output"]))
    after.matrix[0] += 1e-3   # "the": frozen by --freeze-top 1000
    moved = tmp_path / "moved.txt"
    save_vectors(after, str(moved), "glove")
    frozen = tmp_path / "frozen.txt"
    frozen.write_text("the\nof\n", encoding="utf-8")
    pairs = tmp_path / "pairs.tsv"   # a benchmark of the user's own, instead of eval's (faster)
    pairs.write_text("the\tof\t5\nnews\treport\t8\nsaid\ttold\t9\nyear\tpolice\t1\n", encoding="utf-8")
    out = tmp_path / "r.html"
    result = CliRunner().invoke(cli, ["report", str(trained["before"]), str(moved), "-o", str(out),
                                      "--check-frozen", str(frozen), "--similarity", str(pairs), "-q"])
    assert result.exit_code == 1 and "Error: " in result.output and "1 frozen words changed" in result.output
    page = out.read_text(encoding="utf-8")
    assert "1 changed or removed</span> (first: the)" in page   # the page says which
    assert "<td>pairs</td>" in page and "questions-words" not in page


# --- the projector files -----------------------------------------------------------------------

PROJECTOR_FIELDS = {"model_checkpoint_path", "embeddings", "model_checkpoint_dir"}
EMBEDDING_FIELDS = {"tensor_name", "metadata_path", "bookmarks_path", "tensor_shape", "sprite", "tensor_path"}


def parse_projector_config(text: str) -> list[dict]:
    """tensorboard.projector.ProjectorConfig's text form, strictly: only its fields, strings quoted,
    shapes unsigned; the embeddings, each a dict (tensor_shape a list)."""
    token = re.compile(r'\s*(?:(\w+)\s*\{|(\})|(\w+)\s*:\s*("(?:[^"\\]|\\.)*"|\d+))')
    embeddings, current, pos = [], None, 0
    while pos < len(text.rstrip()):
        m = token.match(text, pos)
        assert m, f"not protobuf text at {text[pos:pos + 40]!r}"
        pos = m.end()
        if m.group(1):
            assert m.group(1) == "embeddings" and current is None
            current = {"tensor_shape": []}
        elif m.group(2):
            assert current is not None
            embeddings.append(current)
            current = None
        else:
            name, value = m.group(3), m.group(4)
            assert name in (EMBEDDING_FIELDS if current is not None else PROJECTOR_FIELDS), name
            if name == "tensor_shape":
                current[name].append(int(value))
            else:
                assert value.startswith('"'), name
                (current if current is not None else {})[name] = json.loads(value)
    assert current is None
    return embeddings


def test_logdir_holds_the_projector_files_of_the_new_and_most_moved_rows(trained):
    logdir = trained["logdir"]
    (embedding,) = parse_projector_config((logdir / "projector_config.pbtxt").read_text(encoding="utf-8"))
    tensor_lines = (logdir / embedding["tensor_path"]).read_text(encoding="utf-8").split("\n")
    assert tensor_lines.pop() == ""
    tensor = np.array([[float(x) for x in line.split("\t")] for line in tensor_lines], np.float32)
    n, dim = embedding["tensor_shape"]
    assert tensor.shape == (n, dim) == (n, 50)
    header, *rows = (logdir / embedding["metadata_path"]).read_text(encoding="utf-8").rstrip("\n").split("\n")
    assert header == "word\tkind\tmoved\tcontexts" and len(rows) == n
    rows = [r.split("\t") for r in rows]
    assert all(len(r) == 4 for r in rows)
    before, after = load_vectors(str(trained["before"])), load_vectors(str(trained["output"]))
    kinds = [r[1] for r in rows]
    s = trained["result"].stats
    assert kinds.count("new") == s["new"] and kinds.count("moved") == kinds.count("moved: before") > 0
    for (word, kind, moved, contexts), row in zip(rows, tensor):
        source = before if kind == "moved: before" else after
        assert (source[word].view(np.uint32) == row.view(np.uint32)).all(), (word, kind)   # bits, through TSV
        assert (int(contexts) >= 1) if kind == "new" else (contexts == "" and float(moved) > 0)
    assert any(f.name.startswith("events.out.tfevents") for f in logdir.iterdir())   # beside the scalars


def test_tensorboards_own_projector_plugin_serves_the_rows_and_their_words(trained):
    """As `tensorboard --logdir` serves the Projector tab: the run's config, the tensor's bytes (each
    row's bits as written), the metadata lines."""
    pp = pytest.importorskip("tensorboard.plugins.projector.projector_plugin",
                             reason="tensorboard is in the test extra (pip install -e '.[test]')")
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client
    from werkzeug.wrappers import Response

    logdir = str(trained["logdir"])
    events = plugin_event_multiplexer.EventMultiplexer()
    events.AddRunsFromDirectory(logdir)
    events.Reload()
    plugin = pp.ProjectorPlugin(base_plugin.TBContext(
        logdir=logdir, multiplexer=events, data_provider=data_provider.MultiplexerDataProvider(events, logdir)))
    apps = plugin.get_plugin_apps()

    def get(route, **query):
        answer = Client(apps[route], Response).get("/", query_string=query)
        assert answer.status_code == 200, answer.get_data(as_text=True)
        return answer.get_data()

    assert json.loads(get(pp.RUNS_ROUTE)) == ["."]   # the folder of the scalars' event files
    (embedding,) = json.loads(get(pp.CONFIG_ROUTE, run="."))["embeddings"]
    n, dim = map(int, embedding["tensorShape"])
    tensor = np.frombuffer(get(pp.TENSOR_ROUTE, run=".", name=embedding["tensorName"]), np.float32)
    lines = get(pp.METADATA_ROUTE, run=".", name=embedding["tensorName"]).decode("utf-8").splitlines()
    assert tensor.size == n * dim and len(lines) == n + 1 and lines[0] == "word\tkind\tmoved\tcontexts"
    before, after = load_vectors(str(trained["before"])), load_vectors(str(trained["output"]))
    for line, row in zip(lines[1:], tensor.reshape(n, dim)):
        word, kind = line.split("\t")[:2]
        assert (row.view(np.uint32) == (before if kind == "moved: before" else after)[word].view(np.uint32)).all()


# --- the parts ---------------------------------------------------------------------------------


def test_the_map_keeps_frozen_words_in_place_and_new_words_only_after():
    from embedtune.report.projection import word_map
    from embedtune.vectors import Vectors

    before = glove(2000)
    matrix = before.matrix.copy()
    matrix[1500] += 0.5   # one word moves
    after = Vectors(before.words + ["zzword"], np.vstack([matrix, before.matrix[[10]] * 1.01]))
    m = word_map(before, after, ["zzword", before.words[1500], "the", "absent-word"], k=3)
    at = {w: i for i, w in enumerate(m.words)}
    assert m.missing == ["absent-word"] and m.chosen.sum() == 3
    assert np.isnan(m.before[at["zzword"]]).all() and np.isfinite(m.after[at["zzword"]]).all()
    assert np.array_equal(m.before[at["the"]], m.after[at["the"]])
    assert not np.allclose(m.before[at[before.words[1500]]], m.after[at[before.words[1500]]])
    assert 0 < sum(m.explained) <= 1


def test_a_summary_that_is_not_one_is_an_error_naming_the_file(tmp_path):
    from embedtune.errors import EmbedtuneError
    from embedtune.report import from_summary

    bad = tmp_path / "run.json"
    bad.write_text('{"loss": 1}', encoding="utf-8")
    with pytest.raises(EmbedtuneError, match=r"run\.json: not a summary of embedtune train"):
        from_summary(str(bad))
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(EmbedtuneError, match=r"run\.json: not a JSON summary"):
        from_summary(str(bad))


def test_a_page_that_would_overwrite_an_input_or_the_output_is_refused_before_any_work(trained, tmp_path):
    from embedtune.checks import check_run
    from embedtune.cli.main import cli
    from embedtune.config import Config
    from embedtune.errors import EmbedtuneError

    after = str(trained["output"])
    result = CliRunner().invoke(cli, ["report", str(trained["before"]), after, "-o", after, "-q"])
    assert result.exit_code == 1 and "output would overwrite an input; choose another -o" in result.output
    for report, message in ((str(trained["before"]), "output would overwrite an input; choose another --report"),
                            (str(tmp_path / "out.txt"), "--report would overwrite the file of -o")):
        config = Config(vectors=str(trained["before"]), corpus=str(trained["before"]),
                        output=str(tmp_path / "out.txt"), report=report)
        with pytest.raises(EmbedtuneError, match=message):
            check_run(config)


def test_a_page_in_a_folder_that_does_not_exist_is_refused_before_the_files_are_loaded(trained, tmp_path, monkeypatch):
    """It was said only after both files had been loaded, scored and mapped."""
    import embedtune.report
    from embedtune.cli.main import cli

    def never(*args, **kwargs):
        raise AssertionError("the report was built before -o was checked")

    monkeypatch.setattr(embedtune.report, "build_report", never)
    out = tmp_path / "no-such-folder" / "page.html"
    result = CliRunner().invoke(cli, ["report", str(trained["before"]), str(trained["output"]), "-o", str(out), "-q"])
    assert result.exit_code == 1, result.output
    assert "does not exist" in result.output and len(result.output.strip().splitlines()) == 1
    assert not out.parent.exists()
