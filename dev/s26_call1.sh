#!/usr/bin/env bash
# Session 26, one H200: the GPU tests of the video and the rest groups (session 25 changed the chunked and worker
# paths only; kernels and engine unchanged since 394553a, whose GPU suite passed), while the row-streamed 9-5-5
# tile compiles in both trees; then issue 41's timing of fused_tc_rows<110, 3> before (.abl = 71fce58) and after
# (this tree), alternating, 3 rounds. Carry .ffmpeg9 and .abl.
source .ffmpeg9/setup.sh
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi -L; nproc
TILE=fp16-fast:9-5-5:th=110,rw=64,r=3,nt=384,mb1=1,mb2=1,fold=1,wg=1,rows=1
(cd .abl && rm -f weights && ln -s ../weights weights)
ab() { (cd $1 && PYTHONPATH=$PWD timeout 300 python3 dev/cuda/ab_tiles.py --tree . --reps $2 --tile $TILE 2>&1 | tail -2); }
mkdir -p .abl/dev/cuda && cp -n dev/cuda/ab_tiles.py .abl/dev/cuda/ 2>/dev/null
( ab .abl 1 > $OUT/build_before.log; ab . 1 > $OUT/build_after.log ) &
V="tests/video/test_gpu_nvdec.py tests/video/test_video.py tests/video/test_handover.py tests/video/test_hwdecode.py tests/video/test_chunks.py tests/video/test_video_abuse.py"
K="tests/kernels/test_gpu_fused.py tests/kernels/test_gpu_kernels.py"
ignore=$(for f in $V $K; do printf -- "--ignore=%s " $f; done)
t0=$(date +%s)
(timeout 420 python3 -m pytest -q -m gpu -rs -p no:cacheprovider $V > $OUT/gpu_video.log 2>&1; echo "video rc=$? $(( $(date +%s)-t0 )) s $(tail -1 $OUT/gpu_video.log)") &
(timeout 420 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests $ignore > $OUT/gpu_rest.log 2>&1; echo "rest rc=$? $(( $(date +%s)-t0 )) s $(tail -1 $OUT/gpu_rest.log)") &
wait
cat $OUT/build_before.log $OUT/build_after.log
for round in 1 2 3; do ab .abl 30; ab . 30; done
