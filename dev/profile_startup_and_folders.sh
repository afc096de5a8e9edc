#!/usr/bin/env bash
# Profiles for issues 17 (a new process's first frame with warm caches) and 23 (where a folder's
# time goes beyond the codec floor). Run on the GPU machine from the repo root; writes under $OUT
# (a run returns a few files only: everything goes into one archive).
set -u
out=${OUT:-/tmp/prof}; work=/tmp/prof-work; mkdir -p "$out" "$work"
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pycache  # as a pip install: bytecode kept
python3 scripts/benchmarks/make_image_folders.py --out /tmp/f --only large --only small --only sizes > /dev/null
mkdir -p /tmp/f/large1 && cp "/tmp/f/large/$(ls /tmp/f/large | head -1)" /tmp/f/large1/
python3 scripts/benchmarks/bench_startup.py --json "$work/startup.json" > "$work/startup.txt" 2>&1
for f in ${FOLDERS:-small sizes}; do
  python3 dev/profile_folder_engine.py /tmp/f/$f > "$work/engine_$f.txt" 2>&1
done
for f in ${FOLDERS:-large1 small sizes}; do
  python3 -m srgpu upscale /tmp/f/$f -o /tmp/o_$f --overwrite -q  # plans warm
  python3 dev/sample_stacks.py --top 40 -- upscale /tmp/f/$f -o /tmp/o_$f --overwrite -q > "$work/stacks_$f.txt" 2>&1
  python3 -m srgpu bench /tmp/f/$f --json > "$work/bench_$f.json" 2> "$work/bench_$f.err"
done
tar -C "$work" -czf "$out/profiles.tgz" .
