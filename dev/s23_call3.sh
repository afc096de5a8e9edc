#!/usr/bin/env bash
# Session 23, third device call (nvidia-h200-x2): the whole GPU suite on the restructured code, four
# groups by file over the two GPUs (dev/gpu_suite_x4.sh), real NVDEC, Dask from .whl.
source .ffmpeg9/setup.sh
mkdir -p $OUT/s
{ nvidia-smi -L; nproc; date; } > $OUT/s/host.txt
OUT=$OUT/s bash dev/gpu_suite_x4.sh ${1:-420}
tar -czf $OUT/suite.tgz -C $OUT s && rm -rf $OUT/s
