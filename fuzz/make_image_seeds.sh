#!/bin/sh
# Regenerates the image fuzzer's seed corpus (fuzz/corpus/image): one tiny file per
# container stb_image reads, from FFmpeg's test pattern. Usage: fuzz/make_image_seeds.sh [dir]
# (regress_* there are the fuzzer's finds, kept as regression seeds; not made here.)
set -e
out=${1:-fuzz/corpus/image}
mkdir -p "$out"
seed() {  # seed <file> <width>x<height> [ffmpeg output options]
  f=$1; size=$2; shift 2
  ffmpeg -loglevel error -y -f lavfi -i "testsrc=size=$size:rate=1" -frames:v 1 "$@" "$out/$f"
}
seed rgb8x6.png 8x6
seed gray5x3.png 5x3 -pix_fmt gray
seed rgba6x4.png 6x4 -pix_fmt rgba
seed rgb16x8.jpg 16x8 -pix_fmt yuvj420p
seed gray8x8.jpg 8x8 -pix_fmt gray
seed rgb7x5.bmp 7x5
seed rgb8x8.gif 8x8
seed rgb4x4.ppm 4x4
seed rgb4x3.tga 4x3
