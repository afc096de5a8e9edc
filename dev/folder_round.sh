#!/usr/bin/env bash
# Issue 23 on the GPU machine in one call: srgpu bench on the small and sizes folders, the same
# folders through the pipeline with cv2.resize in place of the engine (dev/folder_pipeline_overhead.py:
# what the pipeline costs without the GPU), the small folder's timeline and the sizes folder's engine
# profile. Everything goes into one archive under $OUT.
set -u
out=${OUT:-/tmp/round}; work=/tmp/round-work; mkdir -p "$out" "$work"
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pycache
pack() { tar -C "$work" -czf "$out/round.tgz" .; }  # after each part: a run cut short still returns what it did
python3 scripts/benchmarks/make_image_folders.py --out /tmp/f --only small --only sizes --only large > /dev/null
mkdir -p /tmp/f/large1 && cp "/tmp/f/large/$(ls /tmp/f/large | head -1)" /tmp/f/large1/
for f in large1 large; do  # large photos: JPEG outputs in strips, and the same as PNG
  for r in 1 2; do python3 -m srgpu bench /tmp/f/$f --json > "$work/bench_${f}_$r.json" 2> "$work/bench_${f}_$r.err"; done
  python3 -m srgpu bench /tmp/f/$f --json --format png > "$work/bench_${f}_png.json" 2> "$work/bench_${f}_png.err"
done
pack
for f in ${FOLDERS:-small sizes}; do
  python3 dev/folder_pipeline_overhead.py /tmp/f/$f --rounds 5 > "$work/overhead_$f.txt" 2>&1
  for r in 1 2 3; do python3 -m srgpu bench /tmp/f/$f --json > "$work/bench_${f}_$r.json" 2> "$work/bench_${f}_$r.err"; done
done
pack
for j in 8 4; do  # fewer threads: less sharing of the GIL, fewer codecs at once
  python3 dev/folder_pipeline_overhead.py /tmp/f/small --rounds 5 --jobs $j > "$work/overhead_small_j$j.txt" 2>&1
  python3 -m srgpu bench /tmp/f/small --json --jobs $j > "$work/bench_small_j$j.json" 2> "$work/bench_small_j$j.err"
done
python3 dev/folder_timeline.py /tmp/f/small --runs 2 > "$work/timeline_small.txt" 2>&1
python3 dev/profile_folder_engine.py /tmp/f/sizes --profile-pass 0 > "$work/engine_sizes.txt" 2>&1
pack
