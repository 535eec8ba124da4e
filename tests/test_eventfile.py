"""TensorBoard's event files written without TensorFlow (embedtune/training/eventfile.py): the records hold the
bytes TensorFlow's own writer gives the same scalars, TensorBoard reads them back, and files never share a name."""

from __future__ import annotations

import math
import os
import struct

import numpy as np
import pytest

from embedtune.training import eventfile
from embedtune.training.eventfile import EventFile, crc32c, record, scalar_event

SCALARS = [("train/loss", 2.5, 20), ("train/learning_rate", 0.025, 0), ("rows/mean_change_new", -1e-30, 2 ** 40),
           ("t" * 200, math.inf, 1), ("nan", math.nan, 7), ("big", 3.4e38, 127), ("small", 1e-45, 128),
           ("past float32", -1e39, 3), ("rounds to float32's largest", 3.4028235677973366e38, 4)]


def records(path) -> list[bytes]:
    """Each TFRecord's data, the lengths and both CRCs checked."""
    data, out, at = open(path, "rb").read(), [], 0
    while at < len(data):
        (n,), (length_crc,) = struct.unpack("<Q", data[at:at + 8]), struct.unpack("<I", data[at + 8:at + 12])
        body = data[at + 12:at + 12 + n]
        (body_crc,) = struct.unpack("<I", data[at + 12 + n:at + 16 + n])
        assert (length_crc, body_crc) == (eventfile.masked_crc32c(data[at:at + 8]), eventfile.masked_crc32c(body))
        out.append(body)
        at += 16 + n
    assert at == len(data)
    return out


def test_crc32c_is_castagnolis():
    assert crc32c(b"123456789") == 0xE3069283   # the standard check value
    assert crc32c(b"") == 0
    assert crc32c(bytes(32)) == 0x8A9136AA      # RFC 3720's test vectors (iSCSI)
    assert crc32c(bytes([0xFF]) * 32) == 0x62A8AB43


def test_each_scalar_record_holds_the_bytes_tensorflows_writer_gives_it(tmp_path):
    """tf.summary.write of a float32 scalar with TensorBoard's scalar metadata, as this run's scalars were written
    before they were written without TensorFlow: each record's data equals ours at its wall time, bit for bit."""
    from embedtune._tf import tf
    from tensorflow.core.framework import summary_pb2
    from tensorflow.core.util import event_pb2

    metadata = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"),
                                           data_class=summary_pb2.DATA_CLASS_SCALAR)
    writer = tf.summary.create_file_writer(str(tmp_path))
    for tag, value, step in SCALARS:
        with writer.as_default(step=step):
            tf.summary.write(tag, tf.constant(value, tf.float32), metadata=metadata)
    writer.close()
    (path,) = tmp_path.iterdir()
    theirs = records(path)
    first = event_pb2.Event.FromString(theirs[0])
    assert first.file_version == "brain.Event:2"
    assert event_pb2.Event.FromString(eventfile.file_version_event(first.wall_time)).file_version == "brain.Event:2"
    assert len(theirs) == 1 + len(SCALARS)
    for (tag, value, step), body in zip(SCALARS, theirs[1:]):
        wall_time = event_pb2.Event.FromString(body).wall_time
        assert scalar_event(tag, value, step, wall_time) == body, tag
        assert record(scalar_event(tag, value, step, wall_time)) == record(body)


def test_tensorboard_reads_the_scalars_of_a_file_written_here(tmp_path):
    """Through the reader TensorBoard's scalars dashboard uses (its data plugin's accumulator, plugin "scalars")."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.util.tensor_util import make_ndarray

    log = EventFile(str(tmp_path / "logs" / "run"))   # made, with its parent
    for tag, value, step in SCALARS:
        log.scalar(tag, value, step)
    log.flush()
    log.close()
    (path,) = (tmp_path / "logs" / "run").iterdir()
    assert path.name.startswith("events.out.tfevents.") and f".{os.getpid()}." in path.name
    read = EventAccumulator(str(path.parent))
    read.Reload()
    assert sorted(read.PluginTagToContent("scalars")) == sorted(tag for tag, _, _ in SCALARS)
    for tag, value, step in SCALARS:
        (point,) = read.Tensors(tag)
        got = make_ndarray(point.tensor_proto)
        assert point.step == step and got.dtype == np.float32 and got.shape == ()
        with np.errstate(over="ignore"):   # past float32's range: infinite, as TensorFlow's cast gives
            assert got.tobytes() == np.float32(value).tobytes(), tag


def test_files_made_in_the_same_second_never_share_a_name(tmp_path, monkeypatch):
    monkeypatch.setattr(eventfile.time, "time", lambda: 1_800_000_000.25)
    taken = eventfile.file_name(1_800_000_000, next(eventfile._FILES) + 1)   # the next number, left by another
    (tmp_path / taken).write_bytes(b"not ours")
    made = [EventFile(str(tmp_path)) for _ in range(3)]
    for log in made:
        log.close()
    assert len({log.path for log in made}) == 3 and all(os.path.basename(log.path) != taken for log in made)
    assert (tmp_path / taken).read_bytes() == b"not ours"
    assert len(os.listdir(tmp_path)) == 4


def test_a_file_in_the_logdirs_place_is_an_os_error_and_stays(tmp_path):
    place = tmp_path / "logs"
    place.write_bytes(b"mine")
    with pytest.raises(FileExistsError):
        EventFile(str(place))
    assert place.read_bytes() == b"mine"
