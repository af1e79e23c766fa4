#!/usr/bin/env bash
# `make demo`: tinyvideo (a 5.5M-parameter LLaVA-style video VLM trained here, train/) answers six
# questions about a bundled 64-second clip (models/demo/video/: 128 frames at 2 fps, one
# `--image` per frame after its time marker, ~3,200 prompt tokens of which 2,048 visual) once per
# KV method, through `vlkv eval --vqa`: each method's answers, how many match f16's, the KV bytes
# its cache really held next to f16's, and its decode speed. At this length the full-precision
# windows are a small part of the cache, so the 2-3-bit methods hold ~4-5x less than f16.
set -u
VLKV=${VLKV:-build/vlkv}
MODEL=${DEMO_MODEL:-models/tinyvideo.gguf}
MMPROJ=${DEMO_MMPROJ:-models/tinyvideo-mmproj.gguf}
ITEMS=${DEMO_ITEMS:-models/demo/video/items.jsonl}
METHODS=${DEMO_METHODS:-f16,int8,int4,kivi2,akvq_vl,vidkv,zipvl,qcache_vla}
THREADS=${DEMO_THREADS:-$(nproc)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "tinyvideo answers questions about a 64-second clip (128 frames at 2 fps, $ITEMS)"
echo "with each KV method; every answer token reads the whole compressed cache."
if ! "$VLKV" eval -m "$MODEL" --mmproj "$MMPROJ" --vqa "$ITEMS" --kv "$METHODS" --max-answer 8 -t "$THREADS" \
     --answers --out "$out" >"$out/table.txt" 2>"$out/err.txt"; then
  cat "$out/err.txt" >&2
  exit 1
fi

# Each question and every method's answer: eval's own table (--answers).
sed -n '/^answers$/,$p' "$out/table.txt" | tail -n +2 | sed 's/^#/\nQ/'

# answers.csv: model,method,item,line,n_frames,type,question,expected,answer,correct (no commas
# inside the bundled clip's fields). breakdown.csv's n_frames row: held ratio and bytes per item.
awk -F, '
  FNR == 1 { next }
  FILENAME ~ /answers.csv$/ {
    m = $2; i = $3 + 0
    if (!(m in seen)) { seen[m] = 1; order[nm++] = m }
    if (i + 1 > ni) ni = i + 1
    ans[m, i] = $9; right[m] += $10
    next
  }
  FILENAME ~ /breakdown.csv$/ && $3 == "n_frames" { ratio[$2] = $9; held[$2] = $10; tps[$2] = $11 }
  END {
    printf "\n  %-12s %7s %12s %12s %8s %13s\n", "method", "right", "same as f16", "KiB held", "vs f16", "decode tok/s"
    best = ""; bestx = 0
    for (k = 0; k < nm; ++k) {
      m = order[k]; same = 0
      for (i = 0; i < ni; ++i) same += ans[m, i] == ans["f16", i]
      x = ratio[m] > 0 ? 1 / ratio[m] : 0
      printf "  %-12s %5d/%d %10d/%d %12.1f %7.2fx %13.0f\n", m, right[m], ni, same, ni, held[m] / 1024, x, tps[m]
      if (m != "f16" && same == ni && x > bestx) { best = m; bestx = x }
    }
    if (best != "")
      printf "\n%s holds %.1fx less KV than f16 here with the same answers to all %d questions.\n", best, bestx, ni
    else
      printf "\nNo compressed method gave f16'"'"'s answers to all %d questions on this clip.\n", ni
  }' "$out/answers.csv" "$out/breakdown.csv"
echo
echo "KiB held: the KV pages one question's session held at its end (mean over the questions); vs f16:"
echo "f16's bytes for the same tokens / the method's. The full table: vlkv eval ... --vqa $ITEMS."
