#!/usr/bin/env bash
# Session 33, one H200 (16 cores), call 1: NVDEC's check on each engine's chunks (cfa1b42 + 4d02260, re-applied
# in f196f1b/23ec0d7: no NVDEC trial in the coordinator; an engine's chunks start on the CPU decoder and hand over
# until NVDEC has taken over once on that engine) against .base (f3d33a8: the coordinator's trial, then only each
# engine's first chunk handed over). GPU tests first (real NVDEC), then a traced run, then alternated bench rows.
#   rm -rf .base && mkdir .base && git archive f3d33a8 srgpu scripts | tar -x -C .base
#   bash dev/s33_call1.sh      # carry .ffmpeg9 and .base; shared/data/video travels with the tree
source dev/device_lib.sh
PYTHONPATH=/tmp/site:$ROOT timeout 200 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests/video/test_chunks_gpu.py \
  tests/video/test_handover.py tests/video/test_hwdecode.py tests/video/test_gpu_nvdec.py \
  tests/batch/test_folder_workers_gpu.py > $OUT/r/gpu_tests.log 2>&1
echo "gpu tests rc=$? $(( $(date +%s)-t0 )) s: $(tail -1 $OUT/r/gpu_tests.log)"; grep -E "FAILED|Error" $OUT/r/gpu_tests.log | head -10
warm $ROOT $ROOT/.base
traced after $ROOT
bench vf60p $ROOT --no-warmup --rows plain4
bench vf60b1 $ROOT/.base --no-warmup --rows srgpuall
bench vf60a1 $ROOT --no-warmup --rows srgpuall
bench vf60b2 $ROOT/.base --no-warmup --rows srgpuall
bench vf60a2 $ROOT --no-warmup --rows srgpuall
pack
