"""embedtune.keras.Embedding's vocabulary and Keras's conventions (issue 46, items 3-5): list words the
vectors lack warn as `embedtune train` notes them; padding and unknown-word rows with StringLookup and
TextVectorization sharing the layer's ids, raw strings through model.fit; ragged ids; clone_model; every
row frozen under any optimizer; the whole table for a tied output projection; options named as in Python.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

keras = pytest.importorskip("keras")
pytestmark = pytest.mark.filterwarnings("ignore:a Keras optimizer other than embedtune.keras.LazyRows")

from click.testing import CliRunner  # noqa: E402

from embedtune import EmbedtuneError, Vectors  # noqa: E402
from embedtune.cli.main import cli  # noqa: E402
from embedtune.keras import Embedding, LazyRows  # noqa: E402
from embedtune._tf import tf  # noqa: E402

from train_fixtures import REPO  # noqa: E402

from keras_fixtures import seeded  # noqa: E402,F401  (autouse: Keras seeded in every test)

V, DIM, FROZEN = 30, 4, 20
WORDS = [f"w{i}" for i in range(V)]


def table() -> Vectors:
    return Vectors(WORDS, np.random.default_rng(4).normal(size=(V, DIM)).astype(np.float32))


def bits(a) -> np.ndarray:
    return np.asarray(a, np.float32).view(np.uint32)


def served(layer) -> np.ndarray:
    return layer.lookup(tf.range(layer.input_dim)).numpy()


def word_list(tmp_path, name, words) -> str:
    path = tmp_path / name
    path.write_text("".join(w + "\n" for w in words), encoding="utf-8")
    return str(path)


# --- 3. nothing about the vocabulary passes silently --------------------------------------------

def test_list_words_the_vectors_lack_warn_as_train_notes_them_and_strict_lists_refuses(tmp_path):
    freeze = word_list(tmp_path, "freeze.txt", ["w1", "w_typo", "w2", "wq", "wr", "ws", "wt", "wu"])
    with pytest.warns(UserWarning) as caught:
        layer = Embedding.from_vectors(table(), freeze_list=freeze)
    lines = [str(w.message) for w in caught]
    # embedtune train's line (cli/train_cmd.py prints it as a "Note:"), the count and the first five
    assert lines == [f"6 words of {freeze} are not in the vocabulary (first: w_typo, wq, wr, ws, wt)"]
    assert caught[0].filename == __file__   # pointed at the caller's line, not the library's
    assert layer.frozen.tolist() == [i in (1, 2) for i in range(V)]
    with pytest.raises(EmbedtuneError, match=r"freeze.txt line 2: 'w_typo' is not in the vocabulary"):
        Embedding.from_vectors(table(), freeze_list=freeze, strict_lists=True)


def test_an_empty_list_and_listed_new_words_with_a_vector_warn_too(tmp_path):
    empty = word_list(tmp_path, "empty.txt", [])
    with pytest.warns(UserWarning, match=r"^freeze_list .*empty.txt holds no word: it freezes nothing$"):
        Embedding.from_vectors(table(), freeze_list=empty)
    new = word_list(tmp_path, "new.txt", ["w3", "zeta"])
    with pytest.warns(UserWarning, match=r"1 word of .*new.txt already has a vector: it keeps it.*\(first: w3\)"):
        layer = Embedding.from_vectors(table(), new_words=new, init="random")
    assert layer.vocabulary[-1] == "zeta" and layer.input_dim == V + 1


def test_a_clean_layer_warns_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Embedding.from_vectors(table(), freeze_top=FROZEN, mask_token="<pad>", oov_token="[UNK]", mask_zero=True)


def test_options_are_named_as_python_spells_them_and_the_command_keeps_its_flags(tmp_path):
    with pytest.raises(EmbedtuneError, match=r"^freeze_top must be 0 \(off\) or positive, got -5$"):
        Embedding.from_vectors(table(), freeze_top=-5)
    with pytest.raises(EmbedtuneError, match=r"^train_pattern '\(w' is not a valid regular expression"):
        Embedding.from_vectors(table(), train_pattern="(w")
    vectors = tmp_path / "v.txt"
    vectors.write_text("".join(f"{w} 1 2\n" for w in WORDS), encoding="utf-8")
    corpus = tmp_path / "c.txt"
    corpus.write_text("w1 w2\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["train", str(vectors), str(corpus), "-o", str(tmp_path / "o.txt"),
                                      "--freeze-top", "-5"])
    assert result.exit_code == 2 and "--freeze-top must be 0 (off) or positive, got -5" in result.output


# --- 4. strings in, the Keras way --------------------------------------------------------------

def test_padding_and_unknown_rows_come_first_and_the_rules_count_the_files_words():
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN, mask_token="<pad>", oov_token="[UNK]",
                                   mask_zero=True)
    assert layer.vocabulary == ["<pad>", "[UNK]"] + WORDS and layer.input_dim == V + 2
    # the padding row frozen at zeros, the unknown row trainable, freeze_top still the file's first 20 words
    assert layer.frozen.tolist() == [True, False] + [True] * FROZEN + [False] * (V - FROZEN)
    rows = served(layer)
    assert not rows[0].any() and np.array_equal(bits(rows[2:]), bits(table().matrix))
    assert np.allclose(rows[1], table().matrix.mean(axis=0))
    assert layer.compute_mask(np.array([[0, 5]])).numpy().tolist() == [[False, True]]
    assert layer.ids(["w0", "nope"]).tolist() == [2, 1]   # unknown words: the unknown row by default
    frozen_oov = Embedding.from_vectors(table(), oov_token="[UNK]", oov_trainable=False)
    assert frozen_oov.vocabulary[0] == "[UNK]" and frozen_oov.frozen[0] and not frozen_oov.frozen[1:].any()
    with pytest.raises(EmbedtuneError, match=r"oov_token 'w3' is a word of the vectors"):
        Embedding.from_vectors(table(), oov_token="w3")
    with pytest.warns(UserWarning, match=r"mask_zero=True masks id 0, which is the vectors' word 'w0'"):
        Embedding.from_vectors(table(), mask_zero=True)


@pytest.mark.parametrize("tokens", [{"mask_token": "<pad>", "oov_token": "[UNK]"}, {"oov_token": "[UNK]"},
                                    {"mask_token": "<pad>"}, {}])
def test_string_lookup_gives_the_layers_rows(tokens):
    layer = Embedding.from_vectors(table(), **tokens)
    lookup = layer.string_lookup()
    known = ["w0", "w7", "w29"] + [t for t in tokens.values()]
    assert lookup(tf.constant(known)).numpy().tolist() == layer.ids(known).tolist()
    if "oov_token" in tokens:
        assert lookup(tf.constant(["nope"])).numpy().tolist() == [layer.vocabulary.index("[UNK]")]
        assert layer.string_lookup(num_oov_indices=1).vocabulary_size() == layer.input_dim
    with pytest.raises(EmbedtuneError, match=r"^string_lookup\(num_oov_indices=2\) would shift the ids off the "
                                             r"layer's rows"):
        layer.string_lookup(num_oov_indices=2)
    if "oov_token" not in tokens:   # Keras's hint for an unknown word: here it would shift every id by one
        with pytest.raises(EmbedtuneError, match=r"the layer has no unknown-word row .*num_oov_indices=0"):
            layer.string_lookup(num_oov_indices=1)
    with pytest.raises(EmbedtuneError, match=r"^string_lookup: vocabulary comes from the layer"):
        layer.string_lookup(vocabulary=["a"])


def test_text_vectorization_needs_both_rows_and_maps_unknown_words_to_the_unknown_row():
    with pytest.raises(EmbedtuneError, match=r"text_vectorization needs a padding row and an unknown-word row"):
        Embedding.from_vectors(table(), oov_token="[UNK]").text_vectorization()
    layer = Embedding.from_vectors(table(), mask_token="<pad>", oov_token="[UNK]")
    vectorize = layer.text_vectorization(output_sequence_length=5)
    assert vectorize(tf.constant(["W3 w5, nope"])).numpy().tolist() == [[5, 7, 1, 0, 0]]
    with pytest.raises(EmbedtuneError, match=r"output_mode 'tf_idf' gives no ids"):
        layer.text_vectorization(output_mode="tf_idf")


def test_raw_strings_train_end_to_end_through_model_fit_and_frozen_rows_keep_their_bits(tmp_path):
    words = ["the", "a", "cat", "sat", "dog", "ran", "stocks", "fell", "sharply", "markets", "rose"]
    vectors = Vectors(words, np.random.default_rng(5).normal(size=(len(words), DIM)).astype(np.float32))
    layer = Embedding.from_vectors(vectors, freeze_top=6, mask_token="<pad>", oov_token="[UNK]", mask_zero=True)
    start = served(layer)
    text = keras.Input(shape=(1,), dtype="string")
    ids = layer.text_vectorization(output_sequence_length=6)(text)
    out = keras.layers.Dense(1, activation="sigmoid")(keras.layers.GlobalAveragePooling1D()(layer(ids)))
    model = keras.Model(text, out)
    model.compile(LazyRows(keras.optimizers.Adam(1e-2)), "binary_crossentropy")
    x = tf.constant([["the cat sat"], ["a qwzxv dog ran"], ["stocks fell sharply"], ["markets rose, qwzxv"]] * 4)
    y = np.array([1, 1, 0, 0] * 4, np.float32)
    model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(4), epochs=2, verbose=0)
    after = served(layer)
    frozen = layer.frozen
    assert np.array_equal(bits(after[frozen]), bits(start[frozen])) and layer.check_frozen() == frozen.sum()
    assert not np.array_equal(after[1], start[1])   # the unknown row trained (qwzxv)
    assert not np.array_equal(after[layer.ids(["markets"])[0]], start[layer.ids(["markets"])[0]])
    written = layer.save_vectors(tmp_path / "out.txt")   # the vectors' words only: no <pad>, no [UNK]
    lines = (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()
    assert lines[0] == f"{len(words)} {DIM}"   # word2vec's header: the vectors came without a file
    assert [line.split()[0] for line in lines[1:]] == words and written.checked == 6 and written.worst == 0.0


# --- 5. ragged ids, clone_model, every row frozen, the table, tied weights -----------------------

@pytest.mark.filterwarnings("ignore:mask_zero=True masks id 0")   # as Keras's layer: id 0 is w0 here
def test_ragged_ids_look_up_as_kerass_embedding_and_train():
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN, mask_zero=True)
    reference = keras.layers.Embedding(V, DIM, weights=table().matrix, mask_zero=True)
    ids = tf.ragged.constant([[1, 25, -1], [0], [22, 22]])
    out = layer(ids)
    assert isinstance(out, tf.RaggedTensor) and out.to_list() == reference(ids).to_list()
    assert layer.compute_mask(ids).to_list() == reference.compute_mask(ids).to_list()
    optimizer = LazyRows("sgd", rows="sgd", learning_rate=0.1)

    @tf.function
    def step(ids):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(layer(ids).flat_values))
        optimizer.apply(tape.gradient(loss, layer.trainable_variables), layer.trainable_variables)

    step(ids)
    moved = np.flatnonzero((served(layer) != table().matrix).any(axis=1))
    assert moved.tolist() == [22, 25, 29]


def test_clone_model_keeps_the_vocabulary_and_the_tokens():
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN, mask_token="<pad>", oov_token="[UNK]")
    model = keras.Sequential([keras.Input((3,), dtype="int32"), layer])
    clone = keras.models.clone_model(model)
    again = clone.layers[0]
    assert again is not layer and again.vocabulary == layer.vocabulary and again.oov_token == "[UNK]"
    clone.set_weights(model.get_weights())
    assert np.array_equal(served(again), served(layer)) and again.check_frozen() == FROZEN + 1
    assert again.ids(["nope"]).tolist() == [1]


def test_the_shipped_example_sets_no_private_attribute():
    source = (REPO / "examples" / "keras_classifier.py").read_text(encoding="utf-8")
    assert "._vocabulary" not in source and "mask_token=" in source


@pytest.mark.parametrize("make", [lambda: keras.optimizers.AdamW(1e-2, use_ema=True), lambda: keras.optimizers.Ftrl(),
                                  lambda: LazyRows(keras.optimizers.AdamW(1e-2, use_ema=True))])
def test_every_row_frozen_trains_under_any_optimizer(make):
    layer = Embedding.from_vectors(table(), freeze_pretrained=True)
    assert layer.rows is None and layer.trainable_weights == []   # no empty variable for an optimizer to trip on
    model = keras.Sequential([keras.Input((3,), dtype="int32"), layer, keras.layers.Flatten(), keras.layers.Dense(1)])
    model.compile(make(), "mse")
    x = np.random.default_rng(0).integers(0, V, (8, 3))
    model.fit(x, np.ones((8, 1)), epochs=2, batch_size=4, verbose=0)
    assert np.array_equal(bits(served(layer)), bits(table().matrix)) and layer.check_frozen() == V


def test_the_table_is_one_tensor_and_a_tied_projection_trains_only_trainable_rows():
    layer = Embedding.from_vectors(table(), freeze_top=FROZEN)
    assert np.array_equal(layer.embeddings.numpy(), served(layer))
    h = tf.constant(np.random.default_rng(1).normal(size=(2, DIM)).astype(np.float32))
    assert np.allclose(layer(h, reverse=True).numpy(), h.numpy() @ served(layer).T, atol=1e-6)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.matmul(h, layer.embeddings, transpose_b=True))
    [grad] = tape.gradient(loss, layer.trainable_variables)
    assert grad.shape == (V - FROZEN, DIM)   # the trainable rows' only: frozen rows are no variable

    # A tiny language model, input and output tied: frozen rows keep their bits after fit
    ids = keras.Input((5,), dtype="int32")
    hidden = keras.layers.Dense(DIM)(layer(ids))
    logits = layer(hidden, reverse=True)
    model = keras.Model(ids, logits)
    assert model.output_shape == (None, 5, V)
    model.compile(LazyRows(keras.optimizers.Adam(1e-2)),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.random.default_rng(2).integers(0, V, (16, 5))
    model.fit(x, np.roll(x, 1, axis=1), epochs=2, batch_size=8, verbose=0)
    after = served(layer)
    assert np.array_equal(bits(after[:FROZEN]), bits(table().matrix[:FROZEN]))
    assert (after[FROZEN:] != table().matrix[FROZEN:]).any(axis=1).all()   # every trainable row in the softmax
