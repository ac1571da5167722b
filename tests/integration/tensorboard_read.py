"""Reads tensorboard_job's run with TensorBoard's own reader and checks every value.

usage: tensorboard_read.py <run directory>
Exits 1 with the first difference.
"""
import glob
import math
import os
import shutil
import sys
import tempfile

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.tensorflow_stub import errors
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New
from tensorboard.plugins.hparams import metadata as hparams_metadata


def fail(message):
    print("FAIL: " + message, file=sys.stderr)
    sys.exit(1)


def records(path):
    """Every record of an event file, through the reader that checks both CRCs."""
    reader = PyRecordReader_New(path)
    count = 0
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            return count
        count += 1


run = sys.argv[1]
files = glob.glob(os.path.join(run, "events.out.tfevents.*"))
if len(files) != 1:
    fail(f"expected one event file (the main process's) in {run}, found {files}")
event_file = files[0]

# Framing: header event, hparams, 7 log calls, 1 histogram.
count = records(event_file)
if count != 10:
    fail(f"{event_file} holds {count} records, expected 10")
# The reader does check the CRCs: one flipped byte of data is a DataLossError.
with tempfile.TemporaryDirectory() as scratch:
    broken = os.path.join(scratch, os.path.basename(event_file))
    shutil.copy(event_file, broken)
    with open(broken, "r+b") as f:
        f.seek(20)  # inside the first record's data
        byte = f.read(1)
        f.seek(20)
        f.write(bytes([byte[0] ^ 0xFF]))
    try:
        records(broken)
        fail("a corrupted event file was read without a CRC error")
    except errors.DataLossError:
        pass

acc = event_accumulator.EventAccumulator(
    run, size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
acc.Reload()
tags = acc.Tags()

loss = acc.Scalars("loss")
steps = [e.step for e in loss]
if steps != [0, 1, 2, 3, 4, 6]:
    fail(f"loss steps {steps}, expected [0, 1, 2, 3, 4, 6]")
for e in loss[:5]:
    want = 1.0 / (e.step + 1)
    if abs(e.value - want) > 1e-7 * want:
        fail(f"loss at step {e.step} is {e.value}, expected {want}")
if not math.isnan(loss[5].value):
    fail(f"the NaN loss read back as {loss[5].value}")
epochs = [(e.step, e.value) for e in acc.Scalars("epoch")]
if epochs != [(0, 0.0), (1, 0.0), (2, 1.0), (3, 1.0), (4, 2.0)]:
    fail(f"epoch scalars {epochs}")

note = acc.Tensors("note")
if len(note) != 1 or note[0].step != 5:
    fail(f"text 'note': {note}")
text = note[0].tensor_proto.string_val[0].decode()
if not text.startswith("ranks "):
    fail(f"text 'note' is {text!r}")
if acc.SummaryMetadata("note").plugin_data.plugin_name != "text":
    fail("text 'note' is not under the text plugin")

histograms = acc.Histograms("weights")
if len(histograms) != 1 or histograms[0].step != 2:
    fail(f"histogram 'weights': {histograms}")
h = histograms[0].histogram_value
if (h.min, h.max, h.num, h.sum, h.sum_squares) != (0.0, 99.0, 100.0, 4950.0, 328350.0):
    fail(f"histogram statistics {h.min} {h.max} {h.num} {h.sum} {h.sum_squares}")
if list(h.bucket) != [10.0] * 10 or len(h.bucket_limit) != 10 or h.bucket_limit[-1] != 99.0:
    fail(f"histogram buckets {list(h.bucket_limit)} {list(h.bucket)}")

content = acc.PluginTagToContent(hparams_metadata.PLUGIN_NAME)
if list(content) != [hparams_metadata.SESSION_START_INFO_TAG]:
    fail(f"hparams tags {list(content)}")
start = hparams_metadata.parse_session_start_info_plugin_data(
    content[hparams_metadata.SESSION_START_INFO_TAG])
hparams = {k: start.hparams[k] for k in start.hparams}
got = {"lr": hparams["lr"].number_value, "batch_size": hparams["batch_size"].number_value,
       "optimizer": hparams["optimizer"].string_value}
if got != {"lr": 0.125, "batch_size": 32.0, "optimizer": "adam"} or len(hparams) != 3:
    fail(f"hyper-parameters {hparams}")

print(f"tensorboard_read: {event_file}: {count} records, scalars {tags['scalars']}, "
      f"histograms {tags['histograms']}, tensors {tags['tensors']}, hparams {sorted(got)}: all as written")
