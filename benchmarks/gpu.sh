#!/usr/bin/env bash
# embedtune train on a GPU against gensim Word2Vec on the CPU, sgns and glove (issue 16.4).
#
#   bash benchmarks/gpu.sh                  # install, build the corpus, check the GPU, run, print
#   SKIP_INSTALL=1 bash benchmarks/gpu.sh   # the current Python environment as it is
#   SKIP_INSTALL=1 ALLOW_CPU=1 CORPUS=small.txt bash benchmarks/gpu.sh   # a dry run of the script
#
# Installs embedtune with its bench extra (and tensorflow[and-cuda] when TensorFlow sees no GPU),
# builds benchmarks/_data/corpus.txt (make_corpus.py; it needs Debian's python3.11-doc, installed
# here with apt-get when missing and possible, else the gensim-only part: wiki + lee, 0.53M tokens),
# then times one epoch of `embedtune train --objective sgns` (the compiled CPU kernel, and TensorFlow's
# step on the GPU with EMBEDTUNE_KERNEL=0) and `--objective glove` on GloVe 6B 50d
# (every pretrained row frozen but a random 10%, as benchmarks/train_speed.py does) and gensim
# Word2Vec sg=1 with workers = the CPU count, continuing the same vectors on the same corpus.
# Prints raw corpus words/s of each and the ratios, and the device TensorFlow put the tables on.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if [ -z "${SKIP_INSTALL:-}" ]; then
    $PY -m pip install -q -e '.[bench]'
    if ! $PY -c 'import tensorflow as tf, sys; sys.exit(not tf.config.list_physical_devices("GPU"))' 2>/dev/null; then
        $PY -m pip install -q 'tensorflow[and-cuda]'
    fi
fi
$PY -c 'import tensorflow as tf, sys; g = tf.config.list_physical_devices("GPU"); print("GPUs:", g); sys.exit(not g)' \
    || [ -n "${ALLOW_CPU:-}" ] || { echo "gpu.sh: TensorFlow sees no GPU; nothing to measure" >&2; exit 1; }
export CORPUS=${CORPUS:-benchmarks/_data/corpus.txt}

mkdir -p benchmarks/_data
if [ ! -s "$CORPUS" ]; then
    if [ ! -d /usr/share/doc/python3.11/html/_sources ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        apt-get install -y -q python3.11-doc >/dev/null 2>&1 || true
    fi
    $PY benchmarks/make_corpus.py || $PY - <<'EOF'
# make_corpus.py could not read the Python documentation: the gensim-based part alone
import os, sys
sys.path.insert(0, "benchmarks")
import make_corpus as m
with open("benchmarks/_data/corpus.txt.partial", "w", encoding="utf-8") as out:
    for lines in (m.wiki_lines, lambda: m.plain_lines("lee_background.cor")):
        for tokens in lines():
            if tokens:
                out.write(" ".join(tokens) + "\n")
os.replace("benchmarks/_data/corpus.txt.partial", "benchmarks/_data/corpus.txt")
print("gpu.sh: gensim-only corpus (wiki + lee), not the 1.5M-token benchmark corpus", file=sys.stderr)
EOF
fi

$PY - <<'EOF'
import json, os, subprocess, sys, tempfile, time
import numpy as np

sys.path.insert(0, "data")
import make_sample

corpus = os.environ["CORPUS"]
glove = "benchmarks/_data/glove.6B.50d.txt"
words, matrix = make_sample.load_glove_6b_50d()
if not os.path.exists(glove):
    make_sample.write_glove_text(glove, words, matrix)
rng = np.random.default_rng(1)
trainable = [words[i] for i in np.sort(rng.choice(len(words), len(words) // 10, replace=False))]
tokens = sum(len(line.split()) for line in open(corpus, encoding="utf-8"))
cores = os.cpu_count()
work = tempfile.mkdtemp()
train_list = os.path.join(work, "train.txt")
with open(train_list, "w", encoding="utf-8") as f:
    f.write("".join(w + "\n" for w in trainable))

results = {}
# Plain-sgd sgns steps through the compiled CPU kernel (embedtune/kernels/sgns.py) even with a GPU: "sgns"
# is that, on every core; "sgns-tf" is TensorFlow's step (EMBEDTUNE_KERNEL=0), on the GPU. glove steps
# through TensorFlow.
for name in ("sgns", "sgns-tf", "glove"):
    objective = name.split("-")[0]
    out = os.path.join(work, f"{name}.txt")
    cmd = [sys.executable, "-m", "embedtune.cli.main", "train", glove, corpus, "--train-list", train_list,
           "--objective", objective, "--epochs", "1", "--window", "5", "--negative", "5", "--sample", "1e-3",
           "--min-count", "5", "-o", out, "--json", out + ".json"]
    if objective == "sgns":
        cmd += ["--optimizer", "sgd", "--lr", "0.025"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "1", "EMBEDTUNE_KERNEL": "0" if name == "sgns-tf" else "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode:
        sys.exit(f"embedtune train --objective {objective} ({name}) failed:\n{done.stderr[-3000:]}")
    s = json.load(open(out + ".json"))
    results[name] = s["words_per_second"]
    where = f"the CPU kernel, {cores} threads" if name == "sgns" else "TensorFlow's step, on the GPU"
    print(f"embedtune {name} ({where}): {s['words_per_second']:,} words/s "
          f"({s['train_seconds']} s training, {s['total_seconds']} s in all)", flush=True)

# Where the tables live: the same Trainer the command builds, on a tiny input.
try:
    from embedtune import Vectors
    from embedtune.config import Config, merge, resolve
    from embedtune.corpus import Corpus
    from embedtune.plan.rules import make_plan
    from embedtune.training.trainer import Trainer
    tiny = os.path.join(work, "tiny.txt")
    with open(tiny, "w") as f:
        f.write("the of and to in a is that for it\n" * 50)
    v = Vectors(words[:1000], matrix[:1000])
    with Corpus(tiny, lowercase=True) as c:
        counts = c.count()[0]
        config = resolve(merge(Config(), {"vectors": "x", "corpus": tiny, "output": "y", "format": "glove"},
                               source=None))
        trainer = Trainer(v.matrix, make_plan(v, [], config.vocab), counts, config, corpus=c)
    print("trainable table on", trainer.trainable.device, "| side table on", trainer.side.device, flush=True)
except Exception as err:   # the Trainer's signature may have moved on; the timings above still stand
    print(f"placement not checked: {type(err).__name__}: {err}", flush=True)

from gensim.models import Word2Vec
from gensim.models.word2vec import LineSentence
model = Word2Vec(vector_size=50, window=5, negative=5, sample=1e-3, min_count=5, sg=1, workers=cores, seed=1)
model.build_vocab(LineSentence(corpus))
index = {w: i for i, w in enumerate(words)}
known = [w for w in model.wv.index_to_key if w in index]
for w in known:
    model.wv.vectors[model.wv.key_to_index[w]] = matrix[index[w]]
lock = np.ones(len(model.wv), np.float32)
trains = set(trainable)
for w in known:
    if w not in trains:
        lock[model.wv.key_to_index[w]] = 0.0
model.wv.vectors_lockf = lock
began = time.perf_counter()
model.train(LineSentence(corpus), total_examples=model.corpus_count, epochs=1)
gensim_wps = tokens / (time.perf_counter() - began)
print(f"gensim Word2Vec sg=1 on the CPU ({cores} workers): {gensim_wps:,.0f} words/s", flush=True)
for name, wps in results.items():
    print(f"ratio embedtune {name} / gensim sgns (CPU, {cores} workers): {wps / gensim_wps:.2f}")
EOF
