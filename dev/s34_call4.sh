#!/usr/bin/env bash
# Session 34, one GPU (16 cores), call 4: a video's frame slots made as its first frames need them (overlap.py
# SLOTS_MADE_NOW) on top of 039fcad (NVDEC's trial beside the first chunks). GPU tests of the overlap, video,
# chunked and worker paths (real NVDEC); dev/processor_start.py (4 processes at once, and 1); then this
# session's tree against .base (1be1b80, the session's start): a traced run each, alternated bench rows
# (x264 veryfast, 60 s, defaults), cut to the device time left (about 500 s).
#   rm -rf .base && mkdir .base && git archive 1be1b80 srgpu scripts | tar -x -C .base
#   bash dev/s34_call4.sh      # carry .ffmpeg9 and .base; shared/data/video travels with the tree
source dev/device_lib.sh
PYTHONPATH=/tmp/site:$ROOT timeout 150 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests/engine/test_gpu_overlap.py \
  tests/video/test_video.py tests/video/test_video_abuse.py tests/video/test_chunks_gpu.py > $OUT/r/gpu_tests.log 2>&1
echo "gpu tests rc=$? $(( $(date +%s)-t0 )) s: $(tail -1 $OUT/r/gpu_tests.log)"; grep -E "FAILED|Error" $OUT/r/gpu_tests.log | head -10
PYTHONPATH=/tmp/site:$ROOT timeout 60 python3 dev/processor_start.py --procs 4 --rounds 2 2>&1 | tail -2
warm $ROOT $ROOT/.base
bench vf60b1 $ROOT/.base --no-warmup --rows srgpuall
bench vf60a1 $ROOT --no-warmup --rows srgpuall
traced after $ROOT
bench vf60b2 $ROOT/.base --no-warmup --rows srgpuall
bench vf60a2 $ROOT --no-warmup --rows srgpuall
bench vf60p $ROOT --no-warmup --rows plain4
pack
