#!/usr/bin/env python3
"""Cross-check weft's TensorBoard events against the tensorboard package.

Runs test_tb_events to write an events file, then reads it with
tensorboard's own EventFileLoader (which checks the TFRecord CRCs and parses
the Event protobufs) and compares every scalar with what the C test wrote.
Exits 77 (ctest: skipped) with a message when tensorboard is not installed.
"""
import glob
import os
import subprocess
import sys
import tempfile

try:
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
except ImportError as e:
    print(f"skipped: the tensorboard Python package is not installed ({e}); "
          "pip/apt install tensorboard to run this cross-check")
    sys.exit(77)


def main():
    exe = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([exe, d], check=True)
        files = glob.glob(os.path.join(d, "events.out.tfevents.*"))
        assert len(files) == 1, files
        events = list(EventFileLoader(files[0]).Load())
        assert events[0].file_version == "brain.Event:2", events[0]
        # The loader migrates simple_value to a scalar tensor (TensorBoard's
        # data_compat); either form carries the float.
        scalars = [(e.step, v.tag,
                    v.simple_value if v.WhichOneof("value") == "simple_value"
                    else v.tensor.float_val[0])
                   for e in events[1:] for v in e.summary.value]
        assert len(scalars) == 100, len(scalars)
        for i, (step, tag, value) in enumerate(scalars):
            assert step == i * i * i * 1000, (i, step)
            assert tag == ("train/loss" if i % 2 else "val/acc"), (i, tag)
            assert value == (i - 50) * 0.25, (i, value)  # exact in float32
    print("tensorboard read back 100 scalars exactly")


main()
