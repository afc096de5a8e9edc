#!/usr/bin/env bash
# Session 34, one GPU, call 3: the GPU suite's groups that call 1 could not run on the final code: the "rest"
# group (CUDA_VISIBLE_DEVICES=0,0 hid the GPU there) and the fused tests that need the authors' reference weights.
#   shared/data holds eval/ and reference-weights/ (the two 9-1-5 and 9-5-5 folders) for this call
source .ffmpeg9/setup.sh
export PYTHONPATH=/tmp/site:$PWD
V="tests/video/test_gpu_nvdec.py tests/video/test_video.py tests/video/test_handover.py tests/video/test_hwdecode.py tests/video/test_chunks.py tests/video/test_video_abuse.py"
K="tests/kernels/test_gpu_fused.py tests/kernels/test_gpu_kernels.py"
ignore=$(for f in $V $K; do printf -- "--ignore=%s " $f; done)
timeout 420 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests $ignore > $OUT/gpu_rest.log 2>&1 &
timeout 300 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests/kernels/test_gpu_fused.py -k "accuracy_on_set5" > $OUT/gpu_fused_ref.log 2>&1 &
wait
for f in $OUT/gpu_rest.log $OUT/gpu_fused_ref.log; do echo "== $f: $(tail -1 $f)"; grep -E "^FAILED|^ERROR" $f | head; done
