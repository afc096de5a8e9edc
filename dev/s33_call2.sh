#!/usr/bin/env bash
# Session 33, one H200 (16 cores), call 2: the GPU tests of the chunked, NVDEC and worker paths on the tree
# (per-engine NVDEC check with the trial for short chunks, workers forked from a forkserver), then pool start
# times and alternated bench rows of three trees:
#   .base  f3d33a8: the coordinator's NVDEC trial, then each engine's first chunk handed over; workers spawned
#   .mid   e22b8e8: NVDEC's check on each engine, workers spawned
#   tree   HEAD: .mid plus workers forked from a preloaded forkserver
#   rm -rf .base .mid && mkdir .base .mid && git archive f3d33a8 srgpu scripts | tar -x -C .base
#   mkdir -p .mid/srgpu/batch && git show e22b8e8:srgpu/batch/pool.py > .mid/srgpu/batch/pool.py  (its only change)
#   bash dev/s33_call2.sh   # carry .ffmpeg9 .base .mid (the whole of them is past 64 MiB: .mid is filled in there)
source dev/device_lib.sh
cp -rn $ROOT/srgpu $ROOT/scripts .mid/ && rm .mid/srgpu/batch/worker_start.py && ln -sfn $ROOT/weights .mid/weights
PYTHONPATH=/tmp/site:$ROOT timeout 230 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests/video/test_chunks_gpu.py \
  tests/video/test_handover.py tests/video/test_hwdecode.py tests/video/test_gpu_nvdec.py \
  tests/batch/test_folder_workers_gpu.py tests/engine/test_gpu_memory.py > $OUT/r/gpu_tests.log 2>&1
echo "gpu tests rc=$? $(( $(date +%s)-t0 )) s: $(tail -1 $OUT/r/gpu_tests.log)"; grep -E "^FAILED|^E  " $OUT/r/gpu_tests.log | head -20
PYTHONPATH=/tmp/site:$ROOT timeout 60 python3 -m pytest -q -p no:cacheprovider tests/batch/test_workers.py > $OUT/r/workers_tests.log 2>&1
echo "worker tests (CPU) rc=$? $(tail -1 $OUT/r/workers_tests.log)"
for k in 1 2; do for t in $ROOT/.base $ROOT; do (cd $t && PYTHONPATH=/tmp/site:$t timeout 60 python3 $ROOT/dev/pool_start.py \
  --workers 4 --device cuda:0 --rounds 1 --head 0.3 > $OUT/r/pool_start_$(basename $t)_$k.json 2>&1;
  echo "pool_start $(basename $t) $k: $(tail -c 300 $OUT/r/pool_start_$(basename $t)_$k.json)"); done; done
warm $ROOT $ROOT/.base $ROOT/.mid
traced tree $ROOT
bench vf60p $ROOT --no-warmup --rows plain4
for k in 1 2; do
  bench vf60b$k $ROOT/.base --no-warmup --rows srgpuall
  bench vf60m$k $ROOT/.mid --no-warmup --rows srgpuall
  bench vf60t$k $ROOT --no-warmup --rows srgpuall
done
pack
