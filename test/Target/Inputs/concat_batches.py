#!/usr/bin/python3
"""concat_batches.py DIR STEPS X.npy Y.npy: torch_reference.py train writes
DIR/input_<s>.npy and DIR/labels_<s>.npy per step; a training executable
run with --no-shuffle reads batch s as samples [sB, (s+1)B) of one file."""

import os
import sys

import numpy as np

folder, steps, x_out, y_out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
for prefix, out in (("input", x_out), ("labels", y_out)):
    parts = [np.load(os.path.join(folder, "%s_%d.npy" % (prefix, s))) for s in range(steps)]
    np.save(out, np.concatenate(parts))
