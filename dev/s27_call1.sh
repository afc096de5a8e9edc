#!/usr/bin/env bash
# Session 27, one H200: the GPU tests of session 26's changes (chunks overlapped in process, the decoder's stdout
# closed), the video group and the rest group side by side (kernels and engine unchanged since 394553a).
# Carry .ffmpeg9 and shared (../shared/data/{video,eval,README.md} and the two reference-weight folders).
source .ffmpeg9/setup.sh
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; nproc
V="tests/video/test_gpu_nvdec.py tests/video/test_video.py tests/video/test_handover.py tests/video/test_hwdecode.py tests/video/test_chunks.py tests/video/test_video_abuse.py"
K="tests/kernels/test_gpu_fused.py tests/kernels/test_gpu_kernels.py"
ignore=$(for f in $V $K; do printf -- "--ignore=%s " $f; done)
t0=$(date +%s)
(timeout 420 python3 -m pytest -q -m gpu -rs -p no:cacheprovider $V > $OUT/gpu_video.log 2>&1; echo "video rc=$? $(( $(date +%s)-t0 )) s $(tail -1 $OUT/gpu_video.log)") &
(timeout 420 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests $ignore > $OUT/gpu_rest.log 2>&1; echo "rest rc=$? $(( $(date +%s)-t0 )) s $(tail -1 $OUT/gpu_rest.log)") &
wait
grep -h "PASS\|FAIL\|ERROR\|SKIP" $OUT/gpu_video.log $OUT/gpu_rest.log | head -40
