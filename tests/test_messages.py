"""Messages that named the wrong cause (issue 45, item 12); the fastText ones are in tests/test_fasttext_bytes.py,
a config's bad pattern in tests/test_numbers.py."""

from __future__ import annotations

import json

import pytest

from embedtune.errors import EmbedtuneError
from embedtune.training.checkpoints import state as checkpoint

FINGERPRINT = {"rows": "r", "corpus": {"words": 100, "lines": 10, "digest": "a"}, "settings": {"lr": 0.05}}


def saved(tmp_path, fingerprint=FINGERPRINT):
    folder = tmp_path / "ckpt-5"
    folder.mkdir()
    (folder / checkpoint.STATE_FILE).write_text(json.dumps({"position": {}, "fingerprint": fingerprint}))
    return str(folder)


@pytest.mark.parametrize("changed, blamed", [
    # A corpus with other words gives other new words, so other rows too: the corpus is named, not the rows.
    ({"rows": "r2", "corpus": {"words": 120, "lines": 12, "digest": "b"}},
     "the corpus differs from the checkpoint's (100 words in 10 lines then, 120 in 12 now)"),
    ({"rows": "r2", "settings": {"lr": 0.1}}, "the settings differ from the checkpoint's (lr: 0.05 then, 0.1 now)"),
    ({"rows": "r2"}, "the vectors or freeze rules differ from the checkpoint's"),
])
def test_resume_names_what_changed(tmp_path, changed, blamed):
    with pytest.raises(EmbedtuneError) as err:
        checkpoint.load(saved(tmp_path), None, {**FINGERPRINT, **changed})
    assert err.value.message == f"cannot resume: {blamed}"
