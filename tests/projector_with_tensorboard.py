"""Read the projector files of `embedtune train --logdir DIR` back with TensorBoard's own projector plugin,
as `tensorboard --logdir DIR` serves them; with the run's output (a text vectors file), check every new
and moved row came back bit-identical. Not a test (TensorBoard is no dependency, and installing it
next to TensorFlow changes tf.summary): run it in a virtual environment of its own, e.g.

    python3 -m venv /tmp/tb && /tmp/tb/bin/pip install tensorboard
    /tmp/tb/bin/python tests/projector_with_tensorboard.py DIR OUTPUT.txt

tests/test_report.py reads the same files by the format's rules.
"""
import json
import sys
import time

import numpy as np

began = time.perf_counter()
from tensorboard.backend.event_processing import plugin_event_multiplexer as pem
from tensorboard.plugins import base_plugin
from tensorboard.plugins.projector import projector_plugin as pp
from werkzeug.test import Client
from werkzeug.wrappers import Response

print("import", round(time.perf_counter() - began, 2), "s")
logdir = sys.argv[1]
mux = pem.EventMultiplexer()
mux.AddRunsFromDirectory(logdir)
mux.Reload()
from tensorboard.backend.event_processing import data_provider as dp
plugin = pp.ProjectorPlugin(base_plugin.TBContext(logdir=logdir, multiplexer=mux,
                                                  data_provider=dp.MultiplexerDataProvider(mux, logdir)))
apps = plugin.get_plugin_apps()
runs = json.loads(Client(apps[pp.RUNS_ROUTE], Response).get("/").get_data())
print("runs", runs)
run = runs[0]
cfg = json.loads(Client(apps[pp.CONFIG_ROUTE], Response).get(f"/?run={run}").get_data())
print("config", cfg)
name = cfg["embeddings"][0]["tensorName"]
t = Client(apps[pp.TENSOR_ROUTE], Response).get("/", query_string={"run": run, "name": name})
tensor = np.frombuffer(t.get_data(), np.float32).reshape([int(x) for x in cfg["embeddings"][0]["tensorShape"]])
meta = Client(apps[pp.METADATA_ROUTE], Response).get("/", query_string={"run": run, "name": name}).get_data(as_text=True)
lines = meta.splitlines()
print("tensor", tensor.shape, "metadata lines", len(lines), lines[:2], lines[-1])
assert len(lines) == tensor.shape[0] + 1
if len(sys.argv) > 2:   # the vectors file the run wrote: every row bit-identical
    rows = {}
    with open(sys.argv[2], encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split(" ")
            rows[parts[0]] = np.array(parts[1:], np.float32)
    for line, row in zip(lines[1:], tensor):
        word, kind = line.split("\t")[:2]
        if kind != "moved: before":
            assert (rows[word].view(np.uint32) == row.view(np.uint32)).all(), word
    print("every new and moved row bit-identical to", sys.argv[2])
