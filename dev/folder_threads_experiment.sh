#!/usr/bin/env bash
# Does the folder pipeline's engine stage lose time to its codec threads (the GIL)? srgpu bench on
# the small and sizes folders with 4, 8 and 16 threads, and with Python's GIL switch interval at
# 0.5 ms instead of 5 ms. GPU machine, repo root; folders from make_image_folders.py in /tmp/f.
set -u
out=${OUT:-/tmp/prof}; work=/tmp/thr-work; mkdir -p "$out" "$work"
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pycache
[ -d /tmp/f/small ] || python3 scripts/benchmarks/make_image_folders.py --out /tmp/f --only small --only sizes > /dev/null
for f in small sizes; do
  for j in 4 8 16; do python3 -m srgpu bench /tmp/f/$f --json -j $j > "$work/bench_${f}_j$j.json" 2>/dev/null; done
  python3 -c "import sys; sys.setswitchinterval(0.0005); from srgpu.cli import app; app(['bench', '/tmp/f/$f', '--json'])" \
    > "$work/bench_${f}_switch.json" 2>/dev/null
done
tar -C "$work" -czf "$out/threads.tgz" .
