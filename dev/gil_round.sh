#!/usr/bin/env bash
# Issue 23 on the GPU machine in one call: who holds the GIL in a warm folder run (py-spy --gil,
# dev/folder_gil_profile.py), the codecs in processes against threads (dev/folder_procs_prototype.py),
# and where a first run's plan choice goes (cProfile of srgpu bench). One archive under $OUT.
# Needs py-spy (its 3 MB wheel from PyPI, carried in an ignored folder of its own: with .ffmpeg9 and
# the Dask wheels it would pass the 64 MiB a call may carry): pip install --no-index --find-links DIR py-spy
set -u
out=${OUT:-/tmp/round}; work=/tmp/round-work; mkdir -p "$out" "$work"
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pycache
pack() { tar -C "$work" -czf "$out/round.tgz" .; }
python3 scripts/benchmarks/make_image_folders.py --out /tmp/f --only small --only sizes > /dev/null
for f in small sizes; do
  runs=30; [ $f = sizes ] && runs=6
  py-spy record --gil --threads -r 1000 -f raw -o "$work/gil_$f.txt" -- \
    python3 dev/folder_gil_profile.py run /tmp/f/$f --runs $runs > "$work/gil_${f}_run.txt" 2>&1
  python3 dev/folder_gil_profile.py summary "$work/gil_$f.txt" > "$work/gil_${f}_summary.txt" 2>&1
  py-spy record --threads --idle -r 1000 -f raw -o "$work/all_$f.txt" -- \
    python3 dev/folder_gil_profile.py run /tmp/f/$f --runs $runs > "$work/all_${f}_run.txt" 2>&1
  python3 dev/folder_gil_profile.py summary "$work/all_$f.txt" > "$work/all_${f}_summary.txt" 2>&1
done
pack
for f in small sizes; do
  python3 dev/folder_procs_prototype.py /tmp/f/$f --rounds 5 > "$work/procs_$f.txt" 2>&1
done
for j in 8; do python3 dev/folder_procs_prototype.py /tmp/f/small --rounds 5 --jobs $j > "$work/procs_small_j$j.txt" 2>&1; done
pack
python3 -m cProfile -o "$work/bench_sizes.prof" -m srgpu bench /tmp/f/sizes --json > "$work/bench_sizes.json" 2>&1
python3 - "$work/bench_sizes.prof" > "$work/bench_sizes_plan.txt" 2>&1 <<'PY'
import pstats, sys
s = pstats.Stats(sys.argv[1]); s.sort_stats("cumulative")
s.print_callees("choose")
s.print_callees("check_plan")
s.print_callees("_check_against_reference")
s.print_stats("time_network|_fused_runner|srcnn_reference|compile|load_module|get_function", 20)
PY
pack
