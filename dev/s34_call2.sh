#!/usr/bin/env bash
# Session 34, one GPU (16 cores), call 2: NVDEC's trial beside the first chunks (039fcad, srgpu.video.nvdec_trial)
# against .base (1be1b80: the trial in the coordinator before any chunk is handed out). The chunked, NVDEC and
# worker GPU tests first (real NVDEC), then a traced run of each tree, then alternated bench rows (x264 veryfast,
# 60 s, defaults), then the one-pipeline rows at x264 ultrafast on the 150 s source.
#   rm -rf .base && mkdir .base && git archive 1be1b80 srgpu scripts | tar -x -C .base
#   bash dev/s34_call2.sh      # carry .ffmpeg9 and .base; shared/data/video travels with the tree
source dev/device_lib.sh
PYTHONPATH=/tmp/site:$ROOT timeout 240 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests/video/test_chunks_gpu.py \
  tests/video/test_handover.py tests/video/test_hwdecode.py tests/video/test_gpu_nvdec.py tests/video/test_chunks.py \
  tests/batch/test_folder_workers_gpu.py tests/batch/test_workers.py tests/engine/test_gpu_memory.py > $OUT/r/gpu_tests.log 2>&1
echo "gpu tests rc=$? $(( $(date +%s)-t0 )) s: $(tail -1 $OUT/r/gpu_tests.log)"; grep -E "FAILED|Error" $OUT/r/gpu_tests.log | head -10
warm $ROOT $ROOT/.base
traced after $ROOT
traced before $ROOT/.base
bench vf60p $ROOT --no-warmup --rows plain4
bench vf60b1 $ROOT/.base --no-warmup --rows srgpuall
bench vf60a1 $ROOT --no-warmup --rows srgpuall
bench vf60b2 $ROOT/.base --no-warmup --rows srgpuall
bench vf60a2 $ROOT --no-warmup --rows srgpuall
SRC=$(source_of 150)
bench uf150 $ROOT --no-warmup --settings libx264:ultrafast --rows plain srgpu1
pack
