#!/usr/bin/env bash
# One call on the GPU machine: the GPU suite over the host's GPUs, NVENC's refusal on a GPU without it,
# then issue 40's before/after (dev/bighost_call4.sh) in what time is left. Repo root.
source .ffmpeg9/setup.sh; nvidia-smi -L; nproc
bash dev/gpu_suite_x4.sh ${1:-300}
python3 -m srgpu upscale shared/data/video/smpte_1080p25_h264_aac.mp4 -o /tmp/nv.mp4 --codec h264_nvenc > $OUT/nvenc.txt 2>&1; echo "nvenc rc=$?" >> $OUT/nvenc.txt; ls /tmp/nv.mp4 >> $OUT/nvenc.txt 2>&1; cat $OUT/nvenc.txt
timeout ${2:-220} bash dev/bighost_call4.sh
