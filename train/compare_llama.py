#!/usr/bin/python3
"""llama.cpp's `llama-mtmd-cli` against `vlkv run` (both greedy, f16 KV cache) on the exported pair,
item by item: the same answer text and the same prompt token count (llama-mtmd-cli's `n_past`
after the prompt, as printed with -v; vlkv's `prompt tokens`). Builds of llama.cpp stay outside
the project (/work/llama.cpp/build/bin by default).

  /usr/bin/python3 train/compare_llama.py runs/tv/tinyvideo.gguf runs/tv/tinyvideo-mmproj.gguf \
      tests/data/vlm/tinyvideo/items.jsonl --llama /work/llama.cpp/build/bin/llama-mtmd-cli --limit 24
"""
import argparse
import json
import os
import re
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("mmproj")
    ap.add_argument("items")
    ap.add_argument("--vlkv", default="build/vlkv")
    ap.add_argument("--llama", default="/work/llama.cpp/build/bin/llama-mtmd-cli")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--max-frames", type=int, default=0, help="only items with at most this many frames")
    ap.add_argument("-n", type=int, default=12, help="answer tokens at most (\"bottom right\" is 9 with tok512)")
    a = ap.parse_args()
    base = os.path.dirname(a.items)
    items = [json.loads(x) for x in open(a.items) if x.strip()]
    items = [it for it in items if not a.max_frames or it["n_frames"] <= a.max_frames]
    if a.limit:
        items = items[:a.limit]
    n = same = right_vlkv = right_llama = 0
    for it in items:
        images = []
        for f in it["frames"]:
            images += ["--image", os.path.join(base, f)]
        v = subprocess.run([a.vlkv, "run", "-m", a.model, "--mmproj", a.mmproj, "-p", it["prompt"], "--temp", "0",
                            "-n", str(a.n), "--kv", "f16", "-t", "2"] + images,
                           capture_output=True, encoding="utf-8", errors="replace", check=True)
        ll = subprocess.run([a.llama, "-m", a.model, "--mmproj", a.mmproj, "-p", it["prompt"], "--temp", "0",
                             "-n", str(a.n), "-t", "2", "-c", "8192", "--no-warmup"] + images,
                            capture_output=True, encoding="utf-8", errors="replace")
        got_v = v.stdout.strip()
        got_l = ll.stdout.strip()
        n += 1
        same += got_v == got_l
        right_vlkv += got_v == it["answer"]
        right_llama += got_l == it["answer"]
        m = re.search(r"(\d+) prompt tokens", v.stderr)
        print("%3d frames %-12s vlkv %-12r llama.cpp %-12r expected %-10r vlkv prompt tokens %s%s" % (
            it["n_frames"], it["type"], got_v, got_l, it["answer"], m.group(1) if m else "?",
            "" if ll.returncode == 0 else "  (llama-mtmd-cli exit %d: %s)" % (ll.returncode, ll.stderr.strip()[-200:])),
            flush=True)
    print("same answer %d/%d; correct: vlkv %d, llama.cpp %d" % (same, n, right_vlkv, right_llama))
    return 0 if same == n else 1


if __name__ == "__main__":
    sys.exit(main())
