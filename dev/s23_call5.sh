#!/usr/bin/env bash
# Session 23, fifth device call (nvidia-h200-x2): the kernels group the third call missed (its binary
# test had moved to dev/tests), and the tests fixed after it.
source .ffmpeg9/setup.sh
export PYTHONPATH=/tmp/site:$PWD
mkdir -p $OUT/s
CUDA_VISIBLE_DEVICES=0 timeout 420 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests/test_gpu_kernels.py \
  dev/tests/test_gpu_binary.py > $OUT/s/gpu_kernels.log 2>&1 &
CUDA_VISIBLE_DEVICES=1,0 timeout 420 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests/test_gpu_memory.py \
  tests/test_route.py tests/test_compare.py tests/test_deinterlace.py > $OUT/s/gpu_fixed.log 2>&1
wait
for f in $OUT/s/*.log; do echo "$f: $(tail -1 $f)"; done
tar -czf $OUT/suite2.tgz -C $OUT s && rm -rf $OUT/s
