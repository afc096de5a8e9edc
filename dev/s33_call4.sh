#!/usr/bin/env bash
# Session 33, one H200 (16 cores), call 4, on the final srgpu/ (f3d33a8's chunked.py: NVDEC checked by the
# coordinator; workers forked from a preloaded forkserver): the GPU tests of the chunked, NVDEC and worker
# paths, the worker tests, then alternated bench rows against .base (f3d33a8: workers spawned).
#   rm -rf .base && mkdir .base && git archive f3d33a8 srgpu scripts | tar -x -C .base
#   bash dev/s33_call4.sh      # carry .ffmpeg9 and .base
source dev/device_lib.sh
PYTHONPATH=/tmp/site:$ROOT timeout 200 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests/video/test_chunks_gpu.py \
  tests/video/test_handover.py tests/video/test_hwdecode.py tests/video/test_gpu_nvdec.py \
  tests/batch/test_folder_workers_gpu.py tests/engine/test_gpu_memory.py > $OUT/r/gpu_tests.log 2>&1
echo "gpu tests rc=$? $(( $(date +%s)-t0 )) s: $(tail -1 $OUT/r/gpu_tests.log)"; grep -E "^FAILED|^E  " $OUT/r/gpu_tests.log | head -20
PYTHONPATH=/tmp/site:$ROOT timeout 60 python3 -m pytest -q -p no:cacheprovider tests/batch/test_workers.py > $OUT/r/workers_tests.log 2>&1
echo "worker tests (CPU) rc=$? $(tail -1 $OUT/r/workers_tests.log)"
warm $ROOT $ROOT/.base
bench vf60p $ROOT --no-warmup --rows plain4
for k in 1 2; do
  bench vf60b$k $ROOT/.base --no-warmup --rows srgpuall
  bench vf60t$k $ROOT --no-warmup --rows srgpuall
done
pack
