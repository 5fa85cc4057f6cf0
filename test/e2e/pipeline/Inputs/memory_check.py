#!/usr/bin/python3
"""Peak memory of pipeline rank 0 under GPipe and 1F1B at M and 2M
micro-batches: planned by weftc (its "rank 0 planned peak memory ...
(workspace W MiB" line, in DIR/S-M.log) and measured by the executable
(rank 0's metrics, DIR/S-M.jsonl: peak_rss_bytes - baseline_rss_bytes).
Prints each, then checks that doubling the micro-batches grows GPipe's
peak by more than 1F1B's, planned and measured, and that at 2M GPipe's
measured peak is the larger."""
import json
import re
import sys

d, m = sys.argv[1], int(sys.argv[2])


def planned(s, k):
    text = open("%s/%s-%d.log" % (d, s, k)).read()
    return float(re.search(r"rank 0 planned peak memory [0-9.]+ MiB "
                           r"\(workspace ([0-9.]+) MiB", text).group(1))


def measured(s, k):
    last = [json.loads(l) for l in open("%s/%s-%d.jsonl" % (d, s, k))][-1]
    return (last["peak_rss_bytes"] - last["baseline_rss_bytes"]) / 2**20


rows = {}
for s in ("gpipe", "1f1b"):
    for k in (m, 2 * m):
        rows[s, k] = (planned(s, k), measured(s, k))
        print("%s m=%d: workspace %.1f MiB planned, %.1f MiB measured"
              % (s, k, *rows[s, k]))
grow = {s: [rows[s, 2 * m][i] - rows[s, m][i] for i in (0, 1)]
        for s in ("gpipe", "1f1b")}
ok = True
for i, what in ((0, "planned"), (1, "measured")):
    g, o = grow["gpipe"][i], grow["1f1b"][i]
    good = g > o + 0.5 * (grow["gpipe"][0] - grow["1f1b"][0])
    print("%s growth from m=%d to %d: gpipe %.1f MiB, 1f1b %.1f MiB: %s"
          % (what, m, 2 * m, g, o, "gpipe grows more" if good else "FAIL"))
    ok &= good
big = rows["gpipe", 2 * m][1] > rows["1f1b", 2 * m][1]
print("at m=%d gpipe's measured peak is %s 1f1b's"
      % (2 * m, "above" if big else "NOT above"))
sys.exit(0 if ok and big else 1)
