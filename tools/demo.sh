#!/usr/bin/env bash
# `make demo`: the bundled VLM (tinyvlm-shapes) answers questions about the pictures in
# models/demo/ once per registered KV method, with the bytes each method's cache held next to
# f16's. One picture is ~150 visual tokens: there the methods' full-precision recent windows
# are most of the cache and compression saves little or nothing; the last question puts three
# pictures (465 tokens) in one prompt, where the compressed caches hold 2-3x less than f16.
set -u
VLKV=${VLKV:-build/vlkv}
MODEL=${DEMO_MODEL:-models/tinyvlm-shapes.gguf}
MMPROJ=${DEMO_MMPROJ:-models/tinyvlm-shapes-mmproj.gguf}
err=$(mktemp)
trap 'rm -f "$err"' EXIT

# ask "IMAGE [IMAGE...]" QUESTION
ask() {
  local images=() q="$2" f16_kib=""
  for img in $1; do images+=(--image "models/demo/$img"); done
  printf '\n%s  "%s"\n  %-10s %-34s %9s %10s %10s %8s\n' "$1" "$q" method answer "bits/elem" "B/token" "KiB held" "vs f16"
  for kv in f16 $("$VLKV" run --kv-list | grep -vx f16); do  # f16 first: the others are compared with it
    local ans
    if ! ans=$("$VLKV" run -m "$MODEL" --mmproj "$MMPROJ" "${images[@]}" -p "$q" --temp 0 -n 32 --kv "$kv" 2>"$err"); then
      sed 's/^/  /' "$err"
      continue
    fi
    local bits bpt kib ratio="-"
    bits=$(sed -n 's/.*kv [^:]*: \([0-9.]*\) bits\/elem.*/\1/p' "$err")
    bpt=$(sed -n 's/.*bits\/elem, \([0-9.]*\) B\/token.*/\1/p' "$err")
    kib=$(sed -n 's/.*held [0-9]* B (\([0-9.]*\) KiB of pages.*/\1/p' "$err")
    [ "$kv" = f16 ] && f16_kib=$kib
    [ -n "$f16_kib" ] && [ -n "$kib" ] && ratio=$(awk -v a="$f16_kib" -v b="$kib" 'BEGIN { printf "%.2fx", a / b }')
    printf '  %-10s %-34.34s %9s %10s %10s %8s\n' "$kv" "${ans# }" "$bits" "$bpt" "$kib" "$ratio"
  done
}

ask "005.png" "Where is the blue circle?"
ask "009.png" "How many shapes are there?"
ask "026.png" "Describe the image."
ask "005.png 009.png 026.png" "How many shapes are there?"
echo
echo "vs f16: f16's KiB held / the method's (the pages in use after the answer). Methods keep their"
echo "last tokens in full precision; compression pays once a prompt is longer than those windows."
