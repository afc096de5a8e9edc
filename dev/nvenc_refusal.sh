#!/usr/bin/env bash
# Issue 43 on the GPU machine (H100/H200: no NVENC): srgpu refuses NVENC before any frame, in one
# line naming the GPU, exit 1, nothing written; then the gpu-marked tests (they skip where NVENC exists).
# Usage (from the checkout, after the GPU machine prologue): bash dev/nvenc_refusal.sh [clip]
set -u
clip=${1:-shared/data/video/smpte_1080p25_h264_aac.mp4}
out=$(mktemp -d)/x.mp4
for codec in h264_nvenc hevc_nvenc av1_nvenc; do
  python3 -m srgpu upscale "$clip" -o "$out" --codec "$codec"; echo "$codec rc=$?"
  ls -a "$(dirname "$out")" | grep -v '^\.\.\?$' || echo "nothing written"
done
python3 -m srgpu upscale "$clip" -o "$out" --codec hevc_nvenc --workers 2 --chunk-seconds 2; echo "chunked rc=$?"
ls -a "$(dirname "$out")" | grep -v '^\.\.\?$' || echo "nothing written"
python3 -m pytest tests/video/test_gpu_nvenc.py -q -rs
