#!/usr/bin/env bash
# Session 34, one GPU, call 5 (call 4 found no machine; about 250 s of device time left): a video's frame slots
# made as its first frames need them (overlap.py SLOTS_MADE_NOW). GPU tests of the overlap, video and chunked
# paths (real NVDEC); dev/processor_start.py (4 processes at once); a traced default run of this tree (its
# frame_processor and first frames, against call 2's traces).
#   git revert 5b2f22c        # the change was taken back untried (this call was refused: too little device time)
#   bash dev/s34_call5.sh      # carry .ffmpeg9; shared/data/video travels with the tree
source dev/device_lib.sh
PYTHONPATH=/tmp/site:$ROOT timeout 120 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests/engine/test_gpu_overlap.py \
  tests/video/test_video.py tests/video/test_chunks_gpu.py > $OUT/r/gpu_tests.log 2>&1
echo "gpu tests rc=$? $(( $(date +%s)-t0 )) s: $(tail -1 $OUT/r/gpu_tests.log)"; grep -E "FAILED|Error" $OUT/r/gpu_tests.log | head -10
PYTHONPATH=/tmp/site:$ROOT timeout 45 python3 dev/processor_start.py --procs 4 --rounds 2 2>&1 | tail -2
echo "processor_start $(( $(date +%s)-t0 )) s"
warm $ROOT
traced after2 $ROOT
grep -E "frame_processor|frames.first|python -c|decodes_like" $OUT/r/trace_after2.txt | head -16
pack
