source .ffmpeg9/setup.sh
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
V="tests/video/test_gpu_nvdec.py tests/video/test_video.py tests/video/test_handover.py tests/video/test_hwdecode.py tests/video/test_chunks.py tests/video/test_video_abuse.py"
K="tests/kernels/test_gpu_fused.py tests/kernels/test_gpu_kernels.py"
ignore=$(for f in $V $K; do printf -- "--ignore=%s " $f; done)
timeout 300 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests $ignore > $OUT/gpu_rest.log 2>&1; echo "rest rc=$?"; tail -12 $OUT/gpu_rest.log
