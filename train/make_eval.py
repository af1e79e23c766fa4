#!/usr/bin/python3
"""Writes the tinyvideo eval set: items.jsonl and the frames as PNGs, from the eval stream (2) of
video_data, which training (stream 0) and validation (stream 1) never draw from.

Each video gets two questions of every type; answers are balanced by asking, per type, for the
class asked least so far among those the video offers (the counts are printed).

  /usr/bin/python3 train/make_eval.py --out tests/data/vlm/tinyvideo --seed 2024

items.jsonl, one item per line: {"id", "video", "frames": [PNG paths relative to the file],
"times": [time markers], "n_frames", "question", "answer", "type", "prompt"}; "prompt" is the user
message with one <__media__> per frame (what `vlkv run -p` gets, with --image per frame in order;
the chat template adds "USER: " and "\nASSISTANT:").
"""
import argparse
import collections
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import video_data as vd  # noqa: E402

CLASSES = {"color_at": vd.COLORS, "count": vd.COUNTS, "after": vd.SHAPES, "where_first": vd.QUADRANTS,
           "left_of": ["yes", "no"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--lengths", default="16,32,64,128")
    ap.add_argument("--videos", type=int, default=6, help="videos per length")
    ap.add_argument("--per-type", type=int, default=2, help="questions of each type per video")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    items = []
    answers = collections.defaultdict(collections.Counter)
    for n in [int(x) for x in a.lengths.split(",")]:
        for k in range(a.videos):
            rng = np.random.default_rng([a.seed, vd.STREAM_EVAL, n, k])
            v = vd.make_video(rng, n)
            frames, _ = v.render(rng)
            name = "v%03d_%d" % (n, k)
            os.makedirs(os.path.join(a.out, name), exist_ok=True)
            paths = []
            for i in range(n):
                rel = "%s/%03d.png" % (name, i)
                vd.write_png(os.path.join(a.out, rel), frames[i])
                paths.append(rel)
            cands = vd.candidates(v)
            asked = set()
            for t in vd.TYPES:
                for _ in range(a.per_type):
                    qa = None
                    if t in CLASSES:
                        # the class asked least so far among those this video offers
                        avail = {x[1] for x in cands[t] if x[0] not in asked}
                        ranked = sorted(avail, key=lambda c: (answers[t][c], CLASSES[t].index(c)))
                        if ranked:
                            pool = [x for x in cands[t] if x[1] == ranked[0] and x[0] not in asked]
                            qa = pool[int(rng.integers(len(pool)))]
                    else:
                        pool = [x for x in cands[t] if x[0] not in asked]
                        qa = pool[int(rng.integers(len(pool)))] if pool else None
                    if qa is None:
                        continue
                    asked.add(qa[0])
                    answers[t][qa[1]] += 1
                    items.append({"id": len(items), "video": name, "frames": paths,
                                  "times": [vd.time_text(i) for i in range(n)], "n_frames": n,
                                  "question": qa[0], "answer": qa[1], "type": t,
                                  "prompt": vd.user_message(n, qa[0])})
    with open(os.path.join(a.out, "items.jsonl"), "w") as f:
        for it in items:
            f.write(json.dumps(it) + "\n")
    total = sum(os.path.getsize(os.path.join(d, x)) for d, _, fs in os.walk(a.out) for x in fs)
    print("%d items, %d bytes in %s" % (len(items), total, a.out))
    for t in vd.TYPES:
        print("  %-12s %s" % (t, dict(sorted(answers[t].items())) if t in CLASSES else sum(answers[t].values())))


if __name__ == "__main__":
    main()
