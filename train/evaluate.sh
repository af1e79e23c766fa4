#!/usr/bin/env bash
# After training (issue 36's checks): export a checkpoint, then with vlkv
#  1. f16 accuracy on the bundled eval set (287 items, 16-128 frames), per length and type;
#  2. f16 accuracy on a fresh set from the same generator under a seed that is in no file of the
#     repo (default: from the clock, printed) - the model is not tuned to the eval set's items;
#  3. Q Cache's lazy-layer map, calibrated on generator videos of seed 11 (not the eval set); the
#     table runs it as calibrate chose (half the layers lazy) and with its 2 most similar layers;
#  4. the per-method table on items-96.jsonl (two videos per length): accuracy, KL, top-1,
#     bits/element, KV held, decode tok/s, per length and type, answers.csv, the SVG plot.
#
#   train/evaluate.sh runs/tv/ckpt.pt runs/tv/eval [FRESH_SEED]
# Env: VLKV (build/vlkv), THREADS (2), METHODS (the table's methods, qcache ones appended).
set -euo pipefail
cd "$(dirname "$0")/.."
CKPT=$1
OUT=$2
FRESH_SEED=${3:-$(date +%s)}
VLKV=${VLKV:-build/vlkv}
PY=/usr/bin/python3
T=${THREADS:-2}
METHODS=${METHODS:-f16,int8,int4,int2,kivi2,akvq_vl,vidkv,zipvl}
ANSWER=12  # tokens: enough for every answer of the generator and </s>
export OMP_WAIT_POLICY=PASSIVE
mkdir -p "$OUT"

$PY train/export_gguf.py "$CKPT" --out-dir "$OUT" --name tinyvideo
M=(-m "$OUT/tinyvideo.gguf" --mmproj "$OUT/tinyvideo-mmproj.gguf")

echo "== 1. f16 on the bundled eval set"
"$VLKV" eval "${M[@]}" --vqa tests/data/vlm/tinyvideo/items.jsonl --kv f16 --max-answer $ANSWER -t "$T" \
  --out "$OUT/eval-f16" | tee "$OUT/eval-f16.txt"

echo "== 2. f16 on a fresh set (generator seed $FRESH_SEED)"
$PY train/make_eval.py --out "$OUT/fresh" --seed "$FRESH_SEED" --lengths 16,32,64,128 --videos 3 >/dev/null
"$VLKV" eval "${M[@]}" --vqa "$OUT/fresh/items.jsonl" --kv f16 --max-answer $ANSWER -t "$T" \
  --out "$OUT/eval-fresh" | tee "$OUT/eval-fresh.txt"

echo "== 3. Q Cache map (calibrated on seed-11 videos of 64 frames)"
$PY train/make_eval.py --out "$OUT/calib" --seed 11 --lengths 64 --videos 2 --per-type 1 >/dev/null
"$VLKV" calibrate "${M[@]}" --vqa "$OUT/calib/items.jsonl" --n 12 -o "$OUT/tinyvideo-qcache.json" -t "$T"

echo "== 4. every method on items-96.jsonl"
MAP="$OUT/tinyvideo-qcache.json"
"$VLKV" eval "${M[@]}" --vqa tests/data/vlm/tinyvideo/items-96.jsonl \
  --kv "$METHODS,qcache_vla:map=$MAP,qcache_vla:map=$MAP+vidkv,qcache_vla:map=$MAP,n_lazy=2,qcache_vla:map=$MAP,n_lazy=2+vidkv" \
  --max-answer $ANSWER -t "$T" \
  --out "$OUT/methods" | tee "$OUT/methods.txt"
