#!/usr/bin/env bash
# Profiles for issues 17 (a new process's first frame with warm caches) and 23 (where a folder's
# time goes beyond the codec floor). Run on the GPU machine from the repo root; writes under $OUT.
set -u
out=${OUT:-/tmp/prof}; mkdir -p "$out"
python3 scripts/benchmarks/make_image_folders.py --out /tmp/f --only large --only small --only sizes > /dev/null
mkdir -p /tmp/f/large1 && cp "/tmp/f/large/$(ls /tmp/f/large | head -1)" /tmp/f/large1/
cat > /tmp/child.py <<'PY'
import time; t0 = time.perf_counter()
import numpy as np
from srgpu.engine import GPUOptions, PlaneSpec, create_engine
from srgpu.model import resolve_model
t1 = time.perf_counter()
engine = create_engine("cuda", resolve_model("9-1-5", 2), 2, GPUOptions(precision="auto"))
t2 = time.perf_counter()
frame = np.random.default_rng(0).integers(0, 256, (720, 1280)).astype(np.uint8)
engine.upscale_frame([frame], [PlaneSpec((1440, 2560), True)], 255)
t3 = time.perf_counter()
print(f"import {t1 - t0:.3f} engine {t2 - t1:.3f} first frame {t3 - t2:.3f}")
PY
for i in 1 2 3; do /usr/bin/time -f "child wall %e s" python3 /tmp/child.py; done > "$out/child.txt" 2>&1
python3 -X importtime -c "from srgpu.engine import GPUOptions, PlaneSpec, create_engine; import srgpu.cli; import cupy" 2> "$out/importtime.txt"
python3 -m cProfile -o "$out/startup.prof" /tmp/child.py >> "$out/child.txt"
python3 -c "import pstats,sys; s=pstats.Stats('$out/startup.prof'); s.sort_stats('cumulative').print_stats(60); s.sort_stats('tottime').print_stats(30)" > "$out/startup_profile.txt"
for f in ${FOLDERS:-large1 small sizes}; do
  python3 -m srgpu upscale /tmp/f/$f -o /tmp/o_$f --overwrite -q  # plans warm
  { /usr/bin/time -f "cli wall %e s" python3 -m srgpu upscale /tmp/f/$f -o /tmp/o_$f --overwrite -q; } 2>> "$out/folders_wall.txt"
  python3 dev/sample_stacks.py --top 40 -- upscale /tmp/f/$f -o /tmp/o_$f --overwrite -q > "$out/stacks_$f.txt" 2>&1
  [ -n "${NO_BENCH:-}" ] || python3 -m srgpu bench /tmp/f/$f --json > "$out/bench_$f.json" 2> "$out/bench_$f.err"
done
# the run returns a few files only: one archive of the profiles
tar -C "$out" -czf /tmp/profiles.tgz . && mv /tmp/profiles.tgz "$out/" && find "$out" -mindepth 1 ! -name profiles.tgz ! -name '*.json' -delete
