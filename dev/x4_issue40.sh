#!/usr/bin/env bash
# Issue 40's table on a 4-GPU host (nvidia-h100-x4 / nvidia-h200-x4), in parts that each fit one device call
# (10 minutes), to run back to back on one warm machine (a warm machine is given back 30 s after a call: have the
# next part's call ready). Every row is scripts/benchmarks/bench_bighost.py (one run, each output checked frame by
# frame); its JSON rows are printed one a line and kept under $OUT/r (packed into r.tgz).
#   bash dev/x4_issue40.sh PART      # carry .ffmpeg9; shared/data/video travels with the tree
# PART (estimated from session 24's 4x H200 figures; run in this order, the first two are the table):
#   tests   the chunked, NVDEC and worker GPU tests on every GPU, then a traced default run (60 s)   ~4 min
#   vf150   x264 veryfast, 150 s: plain plain2 plain4 plain8 srgpu1 srgpu2 srgpuall srgpuall-w8        ~7 min
#   vf60    x264 veryfast, 60 s: the same rows                                                           ~4 min
#   med150  x264 medium, 150 s: plain4 plain8 srgpuall                                                  ~5 min
#   x265    x265 medium, 150 s: plain4 plain8 srgpuall                                                  ~8 min
#   folder  16 clips of 20 s, x264 veryfast: folder-plain4 folder-plain8 folder-srgpu                    ~4 min
# (x264 ultrafast one pipeline: `bench PART ... --settings libx264:ultrafast --rows plain srgpu1`, as dev/s34_call2.sh.)
source dev/device_lib.sh   # $SRC: the 60 s source
part=${1:?which part}
rows="plain plain2 plain4 plain8 srgpu1 srgpu2 srgpuall srgpuall-w8"
case $part in
  tests)
    PYTHONPATH=/tmp/site:$ROOT timeout 300 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests/video/test_chunks_gpu.py \
      tests/video/test_handover.py tests/video/test_hwdecode.py tests/video/test_gpu_nvdec.py \
      tests/batch/test_folder_workers_gpu.py tests/batch/test_route.py tests/engine/test_gpu_memory.py > $OUT/r/gpu_tests.log 2>&1
    echo "gpu tests rc=$? $(( $(date +%s)-t0 )) s: $(tail -1 $OUT/r/gpu_tests.log)"; grep -E "FAILED|Error" $OUT/r/gpu_tests.log | head
    warm $ROOT
    traced all $ROOT ;;
  vf150) SRC=$(source_of 150); BENCH_TIMEOUT=540 bench vf150 $ROOT --rows $rows ;;
  vf60) BENCH_TIMEOUT=540 bench vf60 $ROOT --rows $rows ;;
  med150) SRC=$(source_of 150); BENCH_TIMEOUT=540 bench med150 $ROOT --settings libx264:medium --rows plain4 plain8 srgpuall ;;
  x265) SRC=$(source_of 150); BENCH_TIMEOUT=540 bench x265 $ROOT --settings libx265:medium --rows plain4 plain8 srgpuall ;;
  folder) SRC=$(source_of 150); BENCH_TIMEOUT=540 bench folder $ROOT --rows folder-plain4 folder-plain8 folder-srgpu ;;
  *) echo "no part $part"; exit 2 ;;
esac
pack
