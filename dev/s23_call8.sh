#!/usr/bin/env bash
# Session 23, last device call (nvidia-h200-x2): the GPU tests of what changed after the suite ran
# (a closing frame processor frees its device buffers; scale read from the engine; the merges).
source .ffmpeg9/setup.sh
export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT/s
CUDA_VISIBLE_DEVICES=0 timeout 140 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests/test_gpu_overlap.py \
  tests/test_image_bands.py tests/test_compare.py > $OUT/s/a.log 2>&1 &
CUDA_VISIBLE_DEVICES=1,0 timeout 140 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests/test_chunks_gpu.py \
  tests/test_gpu_memory.py tests/test_route.py tests/test_deinterlace.py > $OUT/s/b.log 2>&1
wait
for f in $OUT/s/*.log; do echo "$f: $(tail -1 $f)"; done
tar -czf $OUT/s.tgz -C $OUT s && rm -rf $OUT/s
