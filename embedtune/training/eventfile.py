"""TensorBoard's event files written without TensorFlow: the scalars of ``--logdir`` (training/tblog.py).

An event file is a sequence of TFRecords (tensorflow/core/lib/io/record_writer.cc): each record is its
length (uint64, little-endian), the masked CRC-32C of those 8 bytes, the data, and the masked CRC-32C of the
data. Each record's data is a serialized ``tensorflow.Event`` (tensorflow/core/util/event.proto): the first
names the file's version, each later one holds a ``Summary`` with one value. A value is what ``tf.summary.write``
makes of a float32 scalar with TensorBoard's scalar metadata: its tag, its tensor (dtype DT_FLOAT, a shape of
no dimensions, the value's 4 bytes as ``tensor_content``) and its metadata (plugin "scalars", data class
scalar). The fields are written in the order of their numbers, as protobuf serializes them, so a record's
bytes are those TensorFlow's own messages give (tests/test_tblog.py).

Only the few messages above are encoded, by hand: their definitions live in TensorFlow and TensorBoard, whose
modules cannot be imported without importing the whole package (TensorFlow's start costs seconds and
hundreds of MB; TensorBoard is not a dependency).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import socket
import struct
import time

FILE_VERSION = b"brain.Event:2"
WRITER = b"embedtune"
_DT_FLOAT = 1            # tensorflow/core/framework/types.proto
_DATA_CLASS_SCALAR = 1   # tensorflow/core/framework/summary.proto, SummaryMetadata.DataClass
_MASK_DELTA = 0xA282EAD8


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1   # CRC-32C's (Castagnoli's) reflected polynomial
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``, as TFRecords use it. Records are a few hundred bytes, a few per loss point,
    so a table in Python is enough."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """The CRC as a TFRecord stores it (rotated and offset: tensorflow/core/lib/hash/crc32c.h, Mask)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def record(data: bytes) -> bytes:
    """One TFRecord holding ``data``."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1   # a negative int64 as protobuf writes it: its two's complement
    while True:
        low, n = n & 0x7F, n >> 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (a string, bytes or a message)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _event(wall_time: float, step: int | None = None, *, file_version: bytes | None = None,
           summary: bytes | None = None) -> bytes:
    out = b"\x09" + struct.pack("<d", wall_time)   # 1: wall_time, a double
    if step:   # 2: step (proto3: a zero is not written)
        out += _varint(2 << 3) + _varint(step)
    if file_version is not None:
        out += _field(3, file_version)
    if summary is not None:
        out += _field(5, summary)
    return out


def _float32(value: float) -> bytes:
    """``value`` as a float32's 4 bytes, rounded as TensorFlow's cast rounds it (past float32's range: infinite)."""
    try:
        return struct.pack("<f", value)
    except OverflowError:
        return struct.pack("<f", math.copysign(math.inf, value))


def scalar_event(tag: str, value: float, step: int, wall_time: float) -> bytes:
    """A serialized Event holding one float32 scalar as ``tf.summary.write`` writes it with TensorBoard's scalar
    metadata (the value rounded to float32, as TensorFlow's tensor holds it)."""
    tensor = (_varint(1 << 3) + _varint(_DT_FLOAT)           # 1: dtype
              + _field(2, b"")                               # 2: tensor_shape, no dimensions
              + _field(4, _float32(value)))                  # 4: tensor_content
    metadata = (_field(1, _field(1, b"scalars"))             # 1: plugin_data {1: plugin_name}
                + _varint(4 << 3) + _varint(_DATA_CLASS_SCALAR))   # 4: data_class
    summary_value = _field(1, tag.encode()) + _field(8, tensor) + _field(9, metadata)   # tag, tensor, metadata
    return _event(wall_time, step, summary=_field(1, summary_value))


def file_version_event(wall_time: float) -> bytes:
    """The first Event of a file: its version, and its writer (field 10, source_metadata: TensorFlow's names
    itself there)."""
    return _event(wall_time, file_version=FILE_VERSION) + _field(10, _field(1, WRITER))


_FILES = itertools.count()   # the number in a file's name: a process's files in one second differ by it


def file_name(made: float, number: int) -> str:
    """TensorFlow's name for an event file (summary_ops' writer: its time, host, process and a number)."""
    return f"events.out.tfevents.{int(made):010d}.{socket.gethostname()}.{os.getpid()}.{number}.v2"


class EventFile:
    """One event file in ``logdir`` (made, with its parents, if missing), named and begun as TensorFlow's
    writer begins one (a file whose first record cannot be written is removed). ``scalar`` adds a value;
    ``flush`` hands what was added to the system; a write or flush that fails raises the OSError."""

    def __init__(self, logdir: str):
        os.makedirs(logdir, exist_ok=True)
        now = time.time()
        while True:   # a new name (a file of the same name left by an earlier process of this pid: the next)
            self.path = os.path.join(logdir, file_name(now, next(_FILES)))
            try:
                self.file = open(self.path, "xb")   # the file is this run's
                break
            except FileExistsError:
                continue
        try:
            self.file.write(record(file_version_event(now)))
            self.file.flush()
        except BaseException:   # a full disk: the file made before its first write failed goes
            with contextlib.suppress(OSError):
                self.file.close()
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            raise

    def scalar(self, tag: str, value: float, step: int) -> None:
        self.file.write(record(scalar_event(tag, value, step, time.time())))

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()
