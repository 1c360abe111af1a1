# SPDX-License-Identifier: BSD-3-Clause
"""Read a run directory's TensorBoard event files with TensorBoard's own reader (t/09).

tb_read.py DIR            every scalar as "tag step value" lines, then "hparams KEY VALUE" lines
tb_read.py --records FILE the number of records, every one read through TensorBoard's TFRecord
                          reader (length and data CRC32C checked); exits 1 on a DataLossError
tb_read.py --raw FILE     "tag step" of every summary value of every record, in file order (the
                          accumulator above drops a step it sees again, so duplicates show here)
"""
import sys

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub import errors, pywrap_tensorflow
from tensorboard.plugins.hparams import metadata, plugin_data_pb2


def records(path, raw=False):
    reader = pywrap_tensorflow.PyRecordReader_New(path.encode())
    n = 0
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            return n
        n += 1
        if raw:
            event = event_pb2.Event.FromString(reader.record())
            for value in event.summary.value:
                print(value.tag, event.step)


def main():
    if sys.argv[1] == "--raw":
        records(sys.argv[2], raw=True)
        return 0
    if sys.argv[1] == "--records":
        try:
            print(records(sys.argv[2]))
        except errors.DataLossError as e:
            print("DataLossError:", e)
            return 1
        return 0
    acc = event_accumulator.EventAccumulator(sys.argv[1], size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    for tag in sorted(acc.Tags()["scalars"]):
        for e in acc.Scalars(tag):
            print(tag, e.step, repr(e.value))
    content = acc.PluginTagToContent(metadata.PLUGIN_NAME)
    data = plugin_data_pb2.HParamsPluginData.FromString(content[metadata.SESSION_START_INFO_TAG])
    for key, value in sorted(data.session_start_info.hparams.items()):
        kind = value.WhichOneof("kind")
        print("hparams", key, getattr(value, kind))
    return 0


if __name__ == "__main__":
    sys.exit(main())
