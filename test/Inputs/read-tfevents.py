"""Prints the scalars of the TensorBoard event files in directory argv[1],
one 'step tag value' line each, sorted -- read as TensorBoard reads them:
TFRecord frames (length, its masked CRC-32C, the record, its masked
CRC-32C, both checked) of tensorflow.Event protocol buffers (tensorboardX's
compiled copy of the schema)."""
import glob
import os
import struct
import sys

from tensorboardX.crc32c import crc32c
from tensorboardX.proto import event_pb2


def masked(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


lines = []
files = sorted(glob.glob(os.path.join(sys.argv[1], "events.out.tfevents.*")))
if not files:
    sys.exit("error: no event file in " + sys.argv[1])
for path in files:
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        record = data[at + 12:at + 12 + length]
        (record_crc,) = struct.unpack("<I", data[at + 12 + length:
                                                 at + 16 + length])
        if masked(header) != header_crc or masked(record) != record_crc:
            sys.exit("error: a corrupt record at byte %d of %s" % (at, path))
        at += 16 + length
        event = event_pb2.Event.FromString(record)
        for value in event.summary.value:
            lines.append((event.step, value.tag, value.simple_value))
for step, tag, value in sorted(lines):
    print("%d %s %.6g" % (step, tag, value))
