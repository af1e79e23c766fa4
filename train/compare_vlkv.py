#!/usr/bin/python3
"""PyTorch's greedy answers (infer.py) against `vlkv run --temp 0` on the exported pair, item by item,
with the prompt token counts: the check that export, prompt layout and tokenizer match.

  /usr/bin/python3 train/compare_vlkv.py runs/tv/ckpt.pt runs/tv/tinyvideo.gguf runs/tv/tinyvideo-mmproj.gguf \
      tests/data/vlm/tinyvideo/items.jsonl --vlkv build/vlkv --limit 12
"""
import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import infer  # noqa: E402
from spm_tokenizer import Tokenizer  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("model")
    ap.add_argument("mmproj")
    ap.add_argument("items")
    ap.add_argument("--vlkv", default="build/vlkv")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--ignore-eos", action="store_true",
                    help="compare 12 greedy tokens past </s> too (a check that does not need a trained model)")
    ap.add_argument("--max-frames", type=int, default=0, help="only items with at most this many frames")
    a = ap.parse_args()
    torch.set_num_threads(2)
    tok = Tokenizer(os.path.join(infer.HERE, "..", "models", "stories260K.gguf"))
    model = infer.load(a.checkpoint)
    base = os.path.dirname(a.items)
    items = [json.loads(x) for x in open(a.items) if x.strip()]
    items = [it for it in items if not a.max_frames or it["n_frames"] <= a.max_frames]
    if a.limit:
        items = items[:a.limit]
    n = same = tokens_same = 0
    for group in infer.by_video(items):
        paths = [os.path.join(base, f) for f in group[0]["frames"]]
        frames = np.stack([infer.read_png(p) for p in paths])
        answers = infer.greedy_packed(model, tok, frames, [it["question"] for it in group], ignore_eos=a.ignore_eos)
        for it, (ans, gen, prompt) in zip(group, answers):
            cmd = [a.vlkv, "run", "-m", a.model, "--mmproj", a.mmproj, "-p", it["prompt"], "--temp", "0", "-n", "12"]
            cmd += ["--ignore-eos"] if a.ignore_eos else []
            for p in paths:
                cmd += ["--image", p]
            r = subprocess.run(cmd, capture_output=True, encoding="utf-8", errors="replace", check=True)
            got = r.stdout[1:] if r.stdout.startswith(" ") else r.stdout
            got, ans = got.rstrip("\n"), ans.rstrip("\n")  # vlkv ends its output with a newline
            m = re.search(r"(\d+) prompt tokens", r.stderr)
            vt = int(m.group(1)) if m else -1
            n += 1
            same += got == ans
            tokens_same += vt == len(prompt)
            print("%3d frames %-12s pytorch %-10r vlkv %-10r expected %-10r prompt tokens %d/%d" % (
                it["n_frames"], it["type"], ans, got, it["answer"], len(prompt), vt), flush=True)
    print("same answer %d/%d, same prompt token count %d/%d" % (same, n, tokens_same, n))
    return 0 if same == n and tokens_same == n else 1


if __name__ == "__main__":
    sys.exit(main())
