#!/usr/bin/env bash
# The GPU suite split by file over the host's GPUs (4 groups; real NVDEC included), each group's log under $OUT.
# Usage (repo root, GPU machine, after `source .ffmpeg9/setup.sh`): bash dev/gpu_suite_x4.sh SECONDS
limit=${1:-330}
export PYTHONPATH=/tmp/site:$PWD
n=$(nvidia-smi -L | grep -c '^GPU ')
g() { echo $(( $1 % n )); }
run() { local gpus=$1 name=$2; shift 2
  CUDA_VISIBLE_DEVICES=$gpus timeout $limit python3 -m pytest -q -m gpu -rs -p no:cacheprovider "$@" > $OUT/gpu_$name.log 2>&1
  echo "$name rc=$? $(tail -1 $OUT/gpu_$name.log)"; }
V="tests/video/test_gpu_nvdec.py tests/video/test_video.py tests/video/test_handover.py tests/video/test_hwdecode.py tests/video/test_chunks.py tests/video/test_video_abuse.py"
K="tests/kernels/test_gpu_fused.py tests/kernels/test_gpu_kernels.py"
ignore=$(for f in $V $K; do printf -- "--ignore=%s " $f; done)
run $(g 0) fused tests/kernels/test_gpu_fused.py dev/tests/test_gpu_fused_not_offered.py &
run $(g 1) kernels tests/kernels/test_gpu_kernels.py dev/tests/test_gpu_binary.py &
run $(g 2) video $V &
rest_gpus=$(g 3); [ $n -gt 1 ] && rest_gpus="$rest_gpus,$(g 2)"  # one GPU: "0,0" would hide it
run $rest_gpus rest tests $ignore &
wait
