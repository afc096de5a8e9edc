#!/usr/bin/env bash
# Issue 23 on the GPU machine in one call: srgpu bench on the small, sizes, mixed and one-large-photo
# folders with the image codecs in processes (auto) and on threads, the GPU tests of the image path,
# and the codec-process tests on 16 cores. One archive under $OUT.
set -u
out=${OUT:-/tmp/round}; work=/tmp/round-work; mkdir -p "$out" "$work"
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pycache
pack() { tar -C "$work" -czf "$out/round.tgz" .; }
python3 scripts/benchmarks/make_image_folders.py --out /tmp/f --only small --only sizes --only mixed --only large > /dev/null
mkdir -p /tmp/f/large1 && cp "/tmp/f/large/$(ls /tmp/f/large | head -1)" /tmp/f/large1/
b() { python3 -m srgpu bench "/tmp/f/$1" --json "${@:3}" > "$work/bench_$2.json" 2> "$work/bench_$2.err"; }
for r in 1 2 3; do b small small_p$r; b small small_t$r --image-codecs threads; done
pack
for r in 1 2; do b sizes sizes_p$r; b sizes sizes_t$r --image-codecs threads; done
b mixed mixed_t1; b mixed mixed_p1 --image-codecs processes
b large1 large1_t1; b large1 large1_p1 --image-codecs processes
b small small_p_j8 --jobs 8
pack
python3 -m pytest -q -p no:cacheprovider tests/test_codec_procs.py tests/test_folder_pipeline.py \
  tests/test_folder_imageproc.py > "$work/cpu_tests.txt" 2>&1
python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_colour.py tests/test_folder_workers_gpu.py \
  > "$work/gpu_tests.txt" 2>&1
pack
