#!/usr/bin/env python3
"""Which lines of srgpu call into CuPy in this process (the coordinator of a chunked run holds a
CUDA context of ~0.5 GB: from where?). Runs ``python3 -m srgpu ARGS`` with a profile hook on every
thread; prints, at exit, each srgpu line that called a CuPy function (Python or compiled), once.

    python3 dev/who_calls_cupy.py upscale SRC -o OUT --gpus 0,1
"""
import atexit
import runpy
import sys
import threading

seen: dict[tuple[str, int, str], int] = {}


def hook(frame, event, arg):  # noqa: ANN001, ANN201
    if event == "c_call":
        mod = getattr(arg, "__module__", None) or ""
        name = getattr(arg, "__qualname__", getattr(arg, "__name__", "?"))
        caller = frame
    elif event == "call":
        mod = frame.f_globals.get("__name__", "")
        name = frame.f_code.co_name
        caller = frame.f_back
    else:
        return
    if not mod.startswith(("cupy", "cupy_backends")) or name == "<module>":
        return
    f = frame
    while f is not None:  # a module being imported defines its classes and functions: not a use
        if f.f_code.co_filename.startswith("<frozen importlib"):
            return
        f = f.f_back
    while caller is not None and "/srgpu/" not in caller.f_code.co_filename:
        caller = caller.f_back
    if caller is None:
        return
    key = (caller.f_code.co_filename.split("/srgpu/")[-1], caller.f_lineno, f"{mod}.{name}")
    seen[key] = seen.get(key, 0) + 1


@atexit.register
def report() -> None:
    sys.setprofile(None)
    print(f"[who_calls_cupy] {len(seen)} srgpu lines called CuPy in the coordinator:", file=sys.stderr)
    for (f, line, fn), n in sorted(seen.items()):
        print(f"[who_calls_cupy]   srgpu/{f}:{line} -> {fn} x{n}", file=sys.stderr)


threading.setprofile(hook)
sys.setprofile(hook)
sys.argv = ["srgpu", *sys.argv[1:]]
runpy.run_module("srgpu", run_name="__main__", alter_sys=True)
