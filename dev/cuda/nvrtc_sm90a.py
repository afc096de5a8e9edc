"""NVRTC straight to an sm_90a cubin for the dev/cuda prototypes (CuPy's RawModule appends its own
-arch=sm_90, which rejects wgmma; srgpu's own kernels go through srgpu.kernels.build.compile_for_arch)."""

from __future__ import annotations

import sys
from pathlib import Path


def compile_cubin(source: Path, names: list[str], options: tuple[str, ...] | list[str],
                  hidden: tuple[str, ...] = ("C7519",)) -> tuple[bytes, dict[str, str], str]:
    """(cubin, lowered names, NVRTC's log). The log's lines go to stderr, except empty ones and those with any of
    ``hidden`` (ptxas' C7519, an arrive at a loop's back edge, is expected in the wgmma prototypes)."""
    from cupy_backends.cuda.libs import nvrtc

    prog = nvrtc.createProgram(source.read_text(), source.name, [], [])
    try:
        for n in names:
            nvrtc.addNameExpression(prog, n)
        try:
            nvrtc.compileProgram(prog, list(options))
        except nvrtc.NVRTCError:
            raise SystemExit(f"NVRTC failed:\n{nvrtc.getProgramLog(prog)}") from None
        log = nvrtc.getProgramLog(prog)
        log = (log.decode(errors="replace") if isinstance(log, bytes) else log).replace("\0", "")
        shown = [ln for ln in log.splitlines() if ln.strip() and not any(h in ln for h in hidden)]
        if shown:
            print("\n".join(shown), file=sys.stderr)
        return nvrtc.getCUBIN(prog), {n: nvrtc.getLoweredName(prog, n) for n in names}, log
    finally:
        nvrtc.destroyProgram(prog)
