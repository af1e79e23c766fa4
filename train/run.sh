#!/bin/sh
# The whole tinyvideo pipeline from one seed: train (resuming from OUT/ckpt.pt if it exists), export
# the GGUF pair, write the eval set, and have vlkv answer one eval item with the exported pair.
#   train/run.sh [OUT]          OUT defaults to runs/tinyvideo (git-ignored)
# Environment: SEED (1), SCHEDULE (train.py's default curriculum), MAX_MINUTES (0: no limit),
# THREADS (2), VLKV (build/vlkv), NICE (0), EXTRA (more train.py flags).
# Stopping it (Ctrl-C, or MAX_MINUTES) loses at most --ckpt-every steps; run it again to continue.
set -eu
cd "$(dirname "$0")/.."
PY=/usr/bin/python3  # Debian's, where python3-torch lives (another python3 may come first on PATH)
OUT=${1:-runs/tinyvideo}
SEED=${SEED:-1}
VLKV=${VLKV:-build/vlkv}
mkdir -p "$OUT"
set -- --out "$OUT" --seed "$SEED" --threads "${THREADS:-2}"
[ -n "${SCHEDULE:-}" ] && set -- "$@" --schedule "$SCHEDULE"
[ -n "${MAX_MINUTES:-}" ] && set -- "$@" --max-minutes "$MAX_MINUTES"
[ -f "$OUT/ckpt.pt" ] && set -- "$@" --resume
# shellcheck disable=SC2086
nice -n "${NICE:-0}" "$PY" train/train.py "$@" ${EXTRA:-}  # log: $OUT/log.jsonl
"$PY" train/export_gguf.py "$OUT/ckpt.pt" --out-dir "$OUT" --name tinyvideo
"$PY" train/make_eval.py --out "$OUT/eval" --seed 2024
ls -l "$OUT/tinyvideo.gguf" "$OUT/tinyvideo-mmproj.gguf"
if [ -x "$VLKV" ]; then
  # the first 16-frame item: vlkv's greedy answer next to the expected one
  "$PY" - "$OUT" "$VLKV" <<'PYEOF'
import json, os, subprocess, sys
out, vlkv = sys.argv[1], sys.argv[2]
it = json.loads(open(os.path.join(out, "eval", "items.jsonl")).readline())
args = [vlkv, "run", "-m", os.path.join(out, "tinyvideo.gguf"), "--mmproj", os.path.join(out, "tinyvideo-mmproj.gguf"),
        "-p", it["prompt"], "--temp", "0", "-n", "12", "-q"]
for f in it["frames"]:
    args += ["--image", os.path.join(out, "eval", f)]
got = subprocess.run(args, capture_output=True, encoding="utf-8", errors="replace", check=True).stdout.strip()
print("vlkv on %d frames: %s -> %r (expected %r)" % (it["n_frames"], it["question"], got, it["answer"]))
PYEOF
fi
