#!/usr/bin/env bash
# Session 33, one H200 (16 cores), call 3, on the final srgpu/: which decoder made each chunk of short
# chunks on worker processes (call 2's failing test: all on the CPU), then the GPU suite but the kernel
# files (unchanged since session 31, which ran them), as dev/gpu_suite_x4.sh's "video" and "rest" groups,
# both at once on the one GPU.   bash dev/s33_call3.sh   # carry .ffmpeg9
source dev/device_lib.sh
for c in 0.5 1.0; do PYTHONPATH=/tmp/site:$ROOT timeout 60 python3 dev/nvdec_short_chunks.py --chunk $c > $OUT/r/short_$c.json 2>&1
  echo "short chunks $c s rc=$?: $(tail -c 1500 $OUT/r/short_$c.json)"; done
V="tests/video/test_gpu_nvdec.py tests/video/test_video.py tests/video/test_handover.py tests/video/test_hwdecode.py tests/video/test_chunks.py tests/video/test_video_abuse.py"
K="tests/kernels/test_gpu_fused.py tests/kernels/test_gpu_kernels.py"
ignore=$(for f in $V $K; do printf -- "--ignore=%s " $f; done)
suite() { local name=$1; shift; PYTHONPATH=/tmp/site:$ROOT timeout 420 python3 -m pytest -q -m gpu -rs -p no:cacheprovider "$@" \
  > $OUT/r/gpu_$name.log 2>&1; echo "$name rc=$? $(( $(date +%s)-t0 )) s: $(tail -1 $OUT/r/gpu_$name.log)"
  grep -E "^FAILED|^ERROR" $OUT/r/gpu_$name.log | head -10; }
suite video $V & suite rest tests $ignore & wait
pack
