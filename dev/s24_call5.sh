#!/usr/bin/env bash
# Session 24, fifth device call (nvidia-h200-x2): the whole GPU suite at this commit (the tests in their
# package folders, the product kernels without ABLATE, the not-offered tiles' checks from dev/tests), four
# groups by file over the host's GPUs (dev/gpu_suite_x4.sh), real NVDEC.
source .ffmpeg9/setup.sh
mkdir -p $OUT/s
{ nvidia-smi -L; nproc; date; git log --oneline -1 2>/dev/null; } > $OUT/s/host.txt
OUT=$OUT/s bash dev/gpu_suite_x4.sh ${1:-380}
grep -h "passed\|failed\|error" $OUT/s/gpu_*.log | grep -v "^PASSED\|^tests" | tail -8
tar -czf $OUT/suite.tgz -C $OUT s && rm -rf $OUT/s
