"""A folder the user hands the tool holds only what the tool wrote (issue 45): in every folder option
(--checkpoint-dir, --logdir) the tool creates, truncates or deletes only files it made itself, told by a
mark it checks, never writes through a link, and refuses a folder where its own names hold the user's
files, with one `Error:` line and nothing changed.

The property runs the real command in this process on 60 rows and 30 short lines for two steps (a
fraction of a second each once TensorFlow is imported), with checkpoints every step and the projector
written, so that every write and delete of the tool meets the user's files.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from embedtune.cli.files import Role
from embedtune.cli.main import cli
from embedtune.errors import EmbedtuneError
from test_no_overwrite import commands
from train_fixtures import SAMPLE_CORPUS, SAMPLE_VECTORS

TINY = ["--max-steps", "2", "--checkpoint-every", "1", "--batch-size", "64", "-q"]
# The names each folder option's writer uses (FOLDER_FILES' patterns, spelt out), and other names a
# user might give a file there that look like the tool's.
NAMES = {
    "checkpoint_dir": (".lock", "ckpt-1", "ckpt-2", "ckpt-2.partial", "ckpt-notes", "ckpt-7.partial.bak"),
    "logdir": ("projector_config.pbtxt", "embedtune-rows.tsv", "embedtune-rows-metadata.tsv", "events.out.tfevents.x"),
}
KINDS = ("file", "folder", "empty folder", "symlink", "hardlink", "dangling symlink")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("own-inputs")
    vectors, corpus = folder / "vectors.txt", folder / "corpus.txt"
    vectors.write_bytes(b"".join(SAMPLE_VECTORS.read_bytes().splitlines(keepends=True)[:60]))
    corpus.write_text("\n".join(line[:300] for line in SAMPLE_CORPUS.read_text().splitlines()[:30]) + "\n")
    return {"vectors": vectors, "corpus": corpus}


def train(inputs, out: Path, *options) -> tuple[int, str]:
    args = ["train", inputs["vectors"], inputs["corpus"], "-o", out, *TINY, *options]
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stderr


def snapshot(root: Path) -> dict:
    """Every path under ``root`` (links not followed): a link's target, a file's bytes and inode, a folder."""
    seen = {}
    for where, folders, files in os.walk(root):
        for name in folders + files:
            path = Path(where) / name
            if path.is_symlink():
                seen[path] = ("link", os.readlink(path))
            elif path.is_dir():
                seen[path] = ("folder",)
            else:
                seen[path] = ("file", path.read_bytes(), path.stat().st_ino)
    return seen


def make(path: Path, kind: str, outside: Path) -> None:
    """A user's ``kind`` at ``path``; a link's target, a file of the user's, is in ``outside``."""
    target = outside / f"target-of-{path.parent.name}-{path.name}"
    target.write_bytes(b"the user's words\nof\n")
    if kind == "file":
        path.write_bytes(b"the user's notes\n")
    elif kind == "folder":
        path.mkdir()
        (path / "notes.txt").write_bytes(b"the user's notes\n")
    elif kind == "empty folder":
        path.mkdir()
    elif kind == "symlink":
        path.symlink_to(target)
    elif kind == "hardlink":
        os.link(target, path)
    elif kind == "dangling symlink":
        path.symlink_to(outside / f"missing-{path.name}")


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
    return lines[0]


def test_the_property_covers_every_folder_option_of_every_command():
    # A new option naming a folder the tool writes into must get its names here.
    folders = {p.name for _, command in commands() for p in command.params
               if isinstance(p.type, Role) and p.type.inside and p.type.role == "write"}
    assert folders == set(NAMES)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(sorted(NAMES)), st.integers(0, 5), st.sampled_from(KINDS)),
                # one entry a path: logdir has 4 names, so 1 and 5 are the same file
                min_size=1, max_size=3, unique_by=lambda x: (x[0], x[1] % len(NAMES[x[0]]))),
       st.booleans(), st.booleans())
def test_user_files_in_the_run_folders_keep_their_bytes_and_links(inputs, tmp_path_factory, entries, existed,
                                                                  overwrite):
    home = tmp_path_factory.mktemp("own")
    outside = home / "outside"
    outside.mkdir()
    folders = {"checkpoint_dir": home / "ckpt", "logdir": home / "logs"}
    for folder in folders.values():
        folder.mkdir()
    for option, at, kind in entries:
        names = NAMES[option]
        make(folders[option] / names[at % len(names)], kind, outside)
    before = snapshot(home)
    out = home / "tuned.txt"
    code, stderr = train(inputs, out, "--checkpoint-dir", folders["checkpoint_dir"], "--logdir", folders["logdir"],
                         *(["--overwrite-checkpoints"] if overwrite else []))
    after = snapshot(home)
    for path, what in before.items():
        assert after.get(path) == what, f"{path}: {what[:2]} became {after.get(path, ('gone',))[:2]}\n{stderr}"
    if code == 0:
        assert out.exists()
    else:
        assert code == 1, stderr
        one_error_line(stderr)
        assert not out.exists()
        assert after.keys() == before.keys(), f"a refused run left {sorted(set(after) - set(before))}"


@pytest.mark.parametrize("kind", ["hardlink", "symlink"])
def test_a_lock_file_linked_to_the_freeze_list_is_refused_and_the_list_kept(inputs, tmp_path, kind):
    """It truncated the list and wrote the PID into it before the list was read: 0 words frozen, exit 0."""
    freeze_list = tmp_path / "freeze.txt"
    freeze_list.write_bytes(b"the\nof\n")
    folder = tmp_path / "ckpt"
    folder.mkdir()
    make_link = os.link if kind == "hardlink" else lambda target, at: os.symlink(target, at)
    make_link(freeze_list, folder / ".lock")
    code, stderr = train(inputs, tmp_path / "tuned.txt", "--checkpoint-dir", folder, "--freeze-list", freeze_list)
    assert code == 1
    assert one_error_line(stderr).startswith(f"Error: {folder / '.lock'}: --checkpoint-dir: a ")
    assert freeze_list.read_bytes() == b"the\nof\n"
    assert sorted(os.listdir(folder)) == [".lock"] and not (tmp_path / "tuned.txt").exists()


def test_a_finished_run_deletes_only_its_own_checkpoints_and_keeps_the_folder_it_was_given(inputs, tmp_path):
    """It deleted every folder named ckpt-* (a user's ckpt-notes/ with its files) and the folder itself."""
    folder = tmp_path / "ckpt"
    (folder / "ckpt-notes").mkdir(parents=True)
    (folder / "ckpt-notes" / "todo.txt").write_bytes(b"keep me\n")
    code, stderr = train(inputs, tmp_path / "tuned.txt", "--checkpoint-dir", folder)
    assert code == 0, stderr
    assert sorted(p.name for p in folder.iterdir()) == ["ckpt-notes"]
    assert (folder / "ckpt-notes" / "todo.txt").read_bytes() == b"keep me\n"
    given_empty = tmp_path / "given"
    given_empty.mkdir()
    code, stderr = train(inputs, tmp_path / "tuned2.txt", "--checkpoint-dir", given_empty)
    assert code == 0, stderr
    assert given_empty.is_dir() and list(given_empty.iterdir()) == []


@pytest.mark.parametrize("kind", ["folder", "file"])
def test_overwrite_checkpoints_refuses_a_users_ckpt_name_with_one_error_line(inputs, tmp_path, kind):
    """A user's folder ckpt-12 was deleted; a plain file ckpt-7 ended in NotADirectoryError's traceback."""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    name = "ckpt-12" if kind == "folder" else "ckpt-7"
    make(folder / name, kind, tmp_path)
    before = snapshot(tmp_path)
    code, stderr = train(inputs, tmp_path / "tuned.txt", "--checkpoint-dir", folder, "--overwrite-checkpoints")
    assert code == 1
    line = one_error_line(stderr)
    assert line.startswith(f"Error: {folder / name}: --checkpoint-dir: not a checkpoint"), line
    assert snapshot(tmp_path) == before


def test_a_users_tensorboard_config_in_the_logdir_is_refused_before_training(inputs, tmp_path):
    logdir = tmp_path / "logs"
    logdir.mkdir()
    (logdir / "projector_config.pbtxt").write_bytes(b"embeddings { tensor_path: \"mine.tsv\" }\n")
    before = snapshot(tmp_path)
    code, stderr = train(inputs, tmp_path / "tuned.txt", "--logdir", logdir)
    assert code == 1
    assert one_error_line(stderr).startswith(f"Error: {logdir / 'projector_config.pbtxt'}: --logdir: a file "
                                             "embedtune did not write")
    assert snapshot(tmp_path) == before
    # The projector files a run wrote are the tool's: a second run into the folder replaces them.
    (logdir / "projector_config.pbtxt").unlink()
    assert train(inputs, tmp_path / "one.txt", "--logdir", logdir)[0] == 0
    code, stderr = train(inputs, tmp_path / "two.txt", "--logdir", logdir)
    assert code == 0, stderr


@pytest.mark.parametrize("where", ["create", "flush"])
def test_a_full_disk_under_the_logdir_is_one_error_line(inputs, tmp_path, monkeypatch, where):
    """A disk full when the event file is begun, or at a later point's flush: one line, no output, and no event
    file left that holds nothing (a real full device, Linux's /dev/full, stands in for the file's writes)."""
    from embedtune.training import eventfile

    if where == "create":
        def full_open(path, mode):
            open(path, mode).close()   # the file is made, and its first record cannot be written
            return open("/dev/full", "wb")
        monkeypatch.setattr(eventfile, "open", full_open, raising=False)
    else:
        begin = eventfile.EventFile.__init__

        def begun(self, logdir):
            begin(self, logdir)
            self.file.close()
            self.file = open("/dev/full", "wb")   # the next points' flushes fail
        monkeypatch.setattr(eventfile.EventFile, "__init__", begun)
    logdir = tmp_path / "logs"
    out = tmp_path / "out" / "tuned.txt"
    out.parent.mkdir()
    code, stderr = train(inputs, out, "--logdir", logdir)
    assert code == 1
    assert one_error_line(stderr) == (f"Error: {logdir}: --logdir: cannot write TensorBoard's scalars: "
                                      "No space left on device")
    assert os.listdir(out.parent) == []
    events = [name for name in os.listdir(logdir) if name.startswith("events.out.tfevents.")]
    assert len(events) == (0 if where == "create" else 1), events


def test_the_checkpoint_folder_never_writes_through_a_lock_it_did_not_make(tmp_path):
    """The library's Folder alone, each kind of user file under .lock: refused, nothing changed."""
    from embedtune.training.checkpoints.folder import Folder, remove

    for kind in KINDS:
        folder = tmp_path / kind.replace(" ", "-")
        folder.mkdir()
        make(folder / ".lock", kind, tmp_path)
        before = snapshot(tmp_path)
        with pytest.raises(EmbedtuneError, match="not embedtune's lock file"):
            with Folder(str(folder)) as opened:
                opened.open(resume=False)
        assert remove(str(folder)) is not None   # the end of a run: nothing deleted either
        assert snapshot(tmp_path) == before, kind


def test_save_vectors_refuses_the_layers_own_vectors_file(tmp_path):
    """Embedding.save_vectors(path) with the layer's input path overwrote the pretrained file."""
    from embedtune.keras import Embedding

    vectors = tmp_path / "vectors.txt"
    vectors.write_bytes(b"".join(SAMPLE_VECTORS.read_bytes().splitlines(keepends=True)[:20]))
    (tmp_path / "link.txt").symlink_to(vectors)
    before = vectors.read_bytes()
    layer = Embedding.from_vectors(str(vectors), freeze_top=10)
    for spelling in (vectors, tmp_path / "link.txt", f"{tmp_path}/./vectors.txt"):
        with pytest.raises(EmbedtuneError, match="output would overwrite an input"):
            layer.save_vectors(spelling)
    assert vectors.read_bytes() == before
    layer.save_vectors(tmp_path / "tuned.txt")   # another name is written as before
    assert (tmp_path / "tuned.txt").exists()


def test_the_lock_is_made_and_taken_over_only_as_the_tools_own(tmp_path, monkeypatch):
    """A killed run's lock (marked, or the process id alone as runs before the mark wrote it) is taken
    over; on a file system without hard links the lock is still made without following a link."""
    import errno
    import json

    from embedtune.training.checkpoints import folder as checkpoints

    old = tmp_path / "old"
    old.mkdir()
    (old / ".lock").write_bytes(b"12345\n")
    with checkpoints.Folder(str(old)) as opened:
        opened.open(resume=False)
        said = json.loads((old / ".lock").read_bytes())
        assert said["embedtune"] == checkpoints.LOCK_MARK and said["process"] == os.getpid()
    assert list(old.iterdir()) == []   # nothing written: the lock goes, the folder (not the tool's) stays

    def no_hard_links(*args):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(checkpoints.os, "link", no_hard_links)
    made = tmp_path / "made"
    with checkpoints.Folder(str(made)) as opened:
        opened.open(resume=False)
        assert json.loads((made / ".lock").read_bytes())["made_folder"] is True
        assert sorted(os.listdir(made)) == [".lock"]
    assert not made.exists()


def test_a_checkpoint_cut_short_by_kill_9_is_removed_and_odd_names_are_left(tmp_path):
    from embedtune.training.checkpoints import folder as checkpoints

    left = tmp_path / ".ckpt-5.0123abcd.partial"   # what a kill -9 while saving or pruning leaves
    (left / "tables_temp").mkdir(parents=True)
    (left / "tables_temp" / "part-00000-of-00001.data-00000-of-00001.tempstate1").write_bytes(b"\0")
    odd = [tmp_path / "ckpt-²", tmp_path / "ckpt-5.partial", tmp_path / ".ckpt-5.partial"]
    for path in odd:
        path.write_bytes(b"mine\n")
    with checkpoints.Folder(str(tmp_path)) as opened:
        opened.open(resume=False)
    assert not left.exists()
    assert all(path.read_bytes() == b"mine\n" for path in odd)


@pytest.mark.parametrize("where", ["rename", "rmtree"])
def test_an_interrupt_while_a_checkpoint_is_deleted_leaves_no_partial(tmp_path, monkeypatch, where):
    """A Ctrl-C or SIGTERM raised while a finished run deletes its checkpoints (after its output is written:
    run.py) took the delete with it midway and left a ``.ckpt-N.<hex>.partial`` (the fault injection's seed 24,
    SIGTERM 0.036 s into the write). Raised just after the rename, or inside the first removal: the checkpoint
    is gone all the same, and the interrupt still reaches the caller."""
    import shutil

    from embedtune.training.checkpoints import folder as checkpoints

    checkpoint = tmp_path / "ckpt-10"
    (checkpoint / "tables").mkdir(parents=True)
    (checkpoint / "tables" / "data").write_bytes(b"\0" * 100)
    rename, rmtree, calls = os.rename, shutil.rmtree, []

    def renamed_then_interrupted(src, dst):
        rename(src, dst)
        raise KeyboardInterrupt

    def interrupted_once(target, *args, **kwargs):
        calls.append(target)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return rmtree(target, *args, **kwargs)

    if where == "rename":
        monkeypatch.setattr(checkpoints.os, "rename", renamed_then_interrupted)
    else:
        monkeypatch.setattr(checkpoints.shutil, "rmtree", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        checkpoints._delete(str(checkpoint))
    assert list(tmp_path.iterdir()) == []
