#!/usr/bin/env bash
# Issue 22 on a machine of two GPUs (nvidia-h200-x2): the chunk tests (two-GPU test included), a
# chunked CLI run and an image folder spread over both GPUs, nvidia-smi sampled meanwhile.
set -u
out=${OUT:-/tmp/two}; mkdir -p "$out"
source .ffmpeg9/setup.sh > /dev/null 2>&1
nvidia-smi -L > "$out/gpus.txt"
python3 -m pytest -q -p no:cacheprovider tests/video/test_chunks_gpu.py -k "two_gpus or share_one" > "$out/tests.txt" 2>&1
( while true; do nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader; sleep 1; done ) > "$out/smi.txt" 2>&1 &
smi=$!
{ time python3 -m srgpu upscale shared/data/video/smpte_1080p25_h264_aac.mp4 -o /tmp/two.mkv --gpus 0,1 --workers 2 --chunk-seconds 2 --overwrite; } > "$out/cli_video.txt" 2>&1
python3 scripts/benchmarks/make_image_folders.py --out /tmp/f --only small > /dev/null
{ time python3 -m srgpu upscale /tmp/f/small -o /tmp/two_small --gpus 0,1 --workers 2 --overwrite; } > "$out/cli_folder.txt" 2>&1
kill $smi
