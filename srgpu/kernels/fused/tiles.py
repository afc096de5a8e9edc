"""Fused kernel instantiations: the arithmetic a kernel uses, one tile (FusedConfig), and the
tiles the tuner times per arithmetic and middle-layer size (fastest first)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

# The arithmetic of a fused kernel (not the user's --precision, which srgpu.engine.plans maps onto these):
# fp32 on the FMA units; fp16 the split hi + lo tensor-core scheme (~22 bits); fp16-fast plain
# fp16 operands (11 bits; a few % of 8-bit pixels one level off).
Arithmetic = Literal["fp32", "fp16", "fp16-fast"]
ARITHMETICS: tuple[Arithmetic, ...] = get_args(Arithmetic)


@dataclass(frozen=True)
class FusedConfig:
    """One kernel instantiation: ``kernel`` 'fp32' or 'tc' (``split`` for the fp16 hi/lo scheme),
    output tile ``th`` rows x (``rw`` - 4) columns, ``r`` rows per chunk, ``nt`` threads, and for
    'tc' the 16-position MMA blocks per warp in conv1 (``mb1``) and conv2 (``mb2``). 'tc' only:
    ``minb`` the blocks per SM the kernel is built for (``__launch_bounds__``' second argument: with
    2, ptxas keeps registers within half the register file per block); ``spart`` with ``stream``:
    0 streams conv2's fragments a tap row at a time through one buffer (load, barrier, MMAs), p > 0
    in p parts per tap row through two buffers, the next part arriving by cp.async while the current
    one's MMAs run. Both default to the kernels as they were (minb 1, spart 0): kernel names and
    params then omit them. ``wg``: conv2 on Hopper's warpgroup MMA (wgmma, fused_tc.cu's WG section),
    built for sm_90a and offered on compute capability 9.0 only (fp16-fast, f2 = 5, stream with
    spart 1, or 2 through three buffers, with ``fold`` its fold blocks' conv1 reading the LR samples into
    conv2's A1 window; or f2 = 1 fold tiles, whose fold blocks run conv1, conv2 and the Z GEMM on wgmma
    with A from registers, ``mb2`` jobs of 64 positions per warpgroup at once). ``rows`` (with ``wg`` and ``fold``,
    9-5-5 only): the row-streamed tile of fused_rows.cu instead, ``th`` rows x 60 columns, conv1 by two producer
    warpgroups into a ring of ``r`` A1 rows, conv2 (A from registers, reused over the tap rows), the Z GEMM and
    conv3 by one consumer warpgroup; ``nt`` 384."""

    kernel: str
    split: bool
    th: int
    rw: int
    r: int
    nt: int
    mb1: int = 2
    mb2: int = 4
    p: int = 4  # 'fp32', f2 = 1: positions per thread (2 or 4)
    fold: bool = False  # f2 = 1, or f2 = 5 with wg: interior tiles of an exact x2 read the integer LR samples (fold.py)
    stream: bool = False  # 'tc', f2 > 1: conv2's weights in shared memory one tap row at a time
    minb: int = 1  # 'tc': blocks per SM in __launch_bounds__ (register budget per thread)
    spart: int = 0  # 'tc' with stream: parts per tap row, double-buffered by cp.async (0: one row, one buffer)
    wg: bool = False  # 'tc': conv2 on the warpgroup MMA (sm_90a)
    rows: bool = False  # with wg, 9-5-5: the row-streamed tile (fused_rows.cu); r: its A1 ring slots
    # 'tc' with wg, f2 = 1, mb2 = 1: fold blocks with warps specialised (fused_tc.cu tc_wg_fold_ws): the last
    # warpgroup sums conv3 while the others run the chain, mbarriers instead of chunk barriers
    ws: bool = False

    @property
    def arithmetic(self) -> Arithmetic:
        return "fp32" if self.kernel == "fp32" else "fp16" if self.split else "fp16-fast"

    def kernel_name(self, f2: int) -> str:
        if self.rows:
            return f"fused_tc_rows<{self.th}, {self.r}>"
        if self.kernel == "fp32":
            return f"fused_fp32<{f2}, {self.th}, {self.rw}, {self.r}, {self.nt}, {self.p}, {'true' if self.fold else 'false'}>"
        return (f"fused_tc<{f2}, {'true' if self.split else 'false'}, {self.th}, {self.rw}, {self.r}, "
                f"{self.nt}, {self.mb1}, {self.mb2}, {'true' if self.fold else 'false'}, "
                f"{'true' if self.stream else 'false'}{self._tc_extra}>")

    @property
    def _tc_extra(self) -> str:
        """Template arguments MINB, SPART after STREAM, only where they differ from the defaults (1, 0),
        so every earlier tile keeps its kernel name."""
        if self.wg:  # then WG and (where set) WS
            return f", {self.minb}, {self.spart}, true" + (", true" if self.ws else "")
        return "" if (self.minb, self.spart) == (1, 0) else f", {self.minb}, {self.spart}"

    def layout_name(self, f2: int) -> str:
        if self.rows:
            return self.kernel_name(f2).replace("fused_tc_rows<", "fused_tc_rows_layout<")
        return self.kernel_name(f2).replace("fused_fp32<", "fused_fp32_layout<").replace("fused_tc<", "fused_tc_layout<")

    @property
    def source(self) -> str:
        return "fused_fp32.cu" if self.kernel == "fp32" else "fused_rows.cu" if self.rows else "fused_tc.cu"

    @property
    def arch(self) -> str | None:
        """The target the kernel needs (None: the device's own): wgmma exists only on sm_90a."""
        return "sm_90a" if self.wg else None

    @property
    def slow_build(self) -> bool:
        """Whether building the kernel takes long enough to hold up a first run (the row-streamed tile's unrolled
        consumer: 63 s under the H100 machine's NVRTC, BENCHMARKS.md); the quick choice builds those in the
        background instead (srgpu.engine.tune.choose)."""
        return self.rows

    def runs_on(self, compute_capability: str) -> bool:
        """Whether a device of ``compute_capability`` runs this kernel (sm_90a code: 9.0 only)."""
        return not self.wg or compute_capability == "9.0"

    @property
    def params(self) -> tuple[tuple[str, Any], ...]:
        base = (("th", self.th), ("rw", self.rw), ("r", self.r), ("nt", self.nt), ("mb1", self.mb1), ("mb2", self.mb2),
                ("p", self.p), ("fold", int(self.fold)), ("stream", int(self.stream)))
        # minb / spart only where set: earlier tiles keep their params (cached plans, labels)
        return base + tuple((k, v) for k, v, d in (("minb", self.minb, 1), ("spart", self.spart, 0),
                                                   ("wg", int(self.wg), 0), ("ws", int(self.ws), 0),
                                                   ("rows", int(self.rows), 0)) if v != d)

    @property
    def label(self) -> str:
        s = f"{self.th}x{self.rw - 4} r{self.r} nt{self.nt}"
        s += f" mb{self.mb1}/{self.mb2}" if self.kernel == "tc" else f" p{self.p}"
        part = f"/{self.spart} pipe" if self.spart else ""
        return (s + (" fold" if self.fold else "") + (" stream" if self.stream else "")
                + part + (f" {self.minb}/SM" if self.minb != 1 else "") + (" wgmma" if self.wg else "")
                + (" ws" if self.ws else "") + (" rows" if self.rows else ""))


def config_for(arithmetic: Arithmetic, f2: int, **params: int) -> FusedConfig:
    """The default tile of ``arithmetic`` for an f2 x f2 middle layer, with ``params`` overriding it.
    With any ``params``, minb and spart are 1 and 0 unless given: FusedConfig.params leaves them
    out at those values, so a cached plan's params name the same kernel whatever tile is first."""
    if arithmetic not in ARITHMETICS:
        raise ValueError(f"unknown arithmetic {arithmetic!r}: use {', '.join(ARITHMETICS)}")
    kernel, split = ("fp32", False) if arithmetic == "fp32" else ("tc", arithmetic == "fp16")
    # the default is the first tile that runs on every device of the arithmetic (not a wgmma one)
    base = dict(next(c for c in CANDIDATES[(arithmetic, f2_key(f2))] if not c.get("wg")))
    if params:
        base.pop("minb", None)
        base.pop("spart", None)
        base.pop("wg", None)
        base.pop("ws", None)
        base.pop("rows", None)
    if params.get("rows"):  # the row-streamed tile: one MMA block per producer warp, no streamed weights
        base.update(stream=0, mb1=1, mb2=1)
    base.update(params)
    base["fold"] = bool(base.get("fold", False))
    base["stream"] = bool(base.get("stream", False))
    if base["fold"] and f2 != 1 and not base.get("wg"):
        raise ValueError("the folded conv1 is built for 9-1-5, and for 9-5-5's wgmma tiles (wg)")
    if base["stream"] and (kernel != "tc" or f2 == 1):
        raise ValueError("streaming conv2's weights is built for the tensor-core kernels of 9-3-5 and 9-5-5")
    base["minb"] = int(base.get("minb", 1))
    base["spart"] = int(base.get("spart", 0))
    if base["minb"] != 1 and (kernel != "tc" or base["minb"] < 1 or base["minb"] * base["nt"] > 2048):
        raise ValueError("minb (blocks per SM) is built for the tensor-core kernels, at most 2048 threads per SM")
    if base["spart"] < 0 or (base["spart"] and (not base["stream"] or (4 * f2) % base["spart"])):
        raise ValueError("spart: 0, or with stream=1 a divisor of conv2's 4 * f2 K-steps per tap row")
    base["wg"] = bool(base.get("wg", False))
    base["ws"] = bool(base.get("ws", False))
    if base["ws"] and (not base["wg"] or f2 != 1 or base.get("mb2", 2) != 1 or base["nt"] < 160 or base["nt"] % 32):
        raise ValueError("ws (warp-specialised fold blocks) is built for 9-1-5's wg tiles with mb2 1 and nt a multiple "
                         "of 32, at least 160 (a warpgroup for the chain and a warp for the sum)")
    base["rows"] = bool(base.get("rows", False))
    if base["rows"]:  # fused_rows.cu RowsCfg
        if (arithmetic != "fp16-fast" or f2 != 5 or not base["wg"] or not base["fold"] or base["stream"] or base["spart"]
                or base["minb"] != 1 or base["rw"] != 64 or base["nt"] != 384 or base["r"] not in (2, 3)
                or base["th"] < 8 or base["th"] % 2 or (base["th"] + 4) % 6 or base["mb1"] != 1
                or base["mb2"] != 1 or base["ws"]):
            raise ValueError("rows (the row-streamed 9-5-5 tile) is built for fp16-fast with wg and fold, rw 64, nt 384, "
                             "mb1 = mb2 = 1, no stream, r (A1 ring slots) 2 or 3, th even with th + 4 a multiple of 6")
    elif base["wg"] and f2 == 1:  # the fold chain's three GEMMs on wgmma (fused_tc.cu tc_wg_fold_z)
        if (arithmetic != "fp16-fast" or not base["fold"] or base["rw"] != 64 or base["r"] % 4
                or base["nt"] % (32 if base["ws"] else 128)
                or base["th"] % 2 or base.get("mb2", 2) not in (1, 2)):
            raise ValueError("wg for 9-1-5 (the fold chain on wgmma) is built for fp16-fast fold tiles with rw 64, r a "
                             "multiple of 4, even th, nt a multiple of 128, mb2 (jobs per warpgroup at once) 1 or 2")
    elif base["wg"]:
        nwg, pc = base["nt"] // 128, base["rw"] // 8
        if (arithmetic != "fp16-fast" or f2 != 5 or not base["stream"] or base["spart"] not in (1, 2) or base["r"] % 8
                or base["nt"] % 128 or (base["r"] // 8 * pc) % nwg or not 1 <= base["r"] // 8 * pc // nwg <= 8
                or (base["fold"] and base["th"] % 2)):
            raise ValueError("wg (conv2 on wgmma) is built for fp16-fast 9-5-5 with stream=1, spart 1 or 2, r a multiple "
                             "of 8, nt a multiple of 128 and (r / 8) * (rw / 8) patches split evenly over nt / 128 "
                             "warpgroups, 1..8 each (with fold: even th)")
    return FusedConfig(kernel, split, **base)


def candidate_configs(arithmetic: Arithmetic, f2: int) -> list[FusedConfig]:
    """Every tile worth timing for ``arithmetic`` and f2, the default first."""
    return [config_for(arithmetic, f2, **c) for c in CANDIDATES[(arithmetic, f2_key(f2))]]


def f2_key(f2: int) -> int:
    """The CANDIDATES key of a middle layer of f2 x f2: 1, 3, or 5 (and larger)."""
    return 1 if f2 == 1 else 3 if f2 == 3 else 5


# Tiles per (arithmetic, f2), fastest first on the GPUs measured so far (figures: BENCHMARKS.md
# "Fused kernels" and "tiles.py's measurement notes, moved from the code"; tiles built but not
# offered: dev/cuda/fused_not_offered.py). fold = 1: the
# folded conv1 on interior tiles of exact x2 upscales of integer samples.
# Tile heights 60/66/108 change how many waves of one block per SM a frame takes (66: 2112 tiles
# of a 4K output, 16 full waves on 132 SMs); the tuner times them on the GPU at hand.
# Shared memory decides most of it: the Z ring (25 fp32 planes of R + 4 rows) and, for f2 > 1, the
# A1 ring and conv2's weights; one block per SM for the defaults.
CANDIDATES: dict[tuple[Arithmetic, int], list[dict[str, int]]] = {
    ("fp32", 1): [dict(th=60, rw=64, r=16, nt=256, p=4, fold=1), dict(th=108, rw=64, r=16, nt=256, p=4, fold=1),
                  dict(th=66, rw=64, r=16, nt=256, p=4, fold=1), dict(th=64, rw=64, r=16, nt=256, p=4, fold=1),
                  dict(th=64, rw=64, r=16, nt=256, p=4, fold=0)],
    ("fp32", 3): [dict(th=32, rw=32, r=8, nt=256)],
    ("fp32", 5): [dict(th=32, rw=32, r=8, nt=256)],
    ("fp16", 1): [dict(th=64, rw=64, r=12, nt=256, mb1=2, mb2=2, fold=1),
                  dict(th=66, rw=64, r=12, nt=256, mb1=2, mb2=2, fold=1),
                  dict(th=64, rw=64, r=16, nt=512, mb1=1, mb2=1, fold=1),
                  dict(th=64, rw=64, r=12, nt=256, mb1=2, mb2=2, fold=0),
                  dict(th=64, rw=64, r=16, nt=512, mb1=1, mb2=1, fold=0),
                  dict(th=64, rw=64, r=12, nt=512, mb1=1, mb2=1, fold=0)],
    ("fp16", 3): [dict(th=32, rw=32, r=4, nt=128, mb1=2, mb2=2)],
    # the split 9-5-5 fits only with conv2's weights streamed; first: spart overlaps the next part's copy with the MMAs
    ("fp16", 5): [dict(th=64, rw=32, r=8, nt=256, mb1=1, mb2=2, stream=1, spart=5),
                  dict(th=64, rw=32, r=8, nt=256, mb1=2, mb2=2, stream=1, spart=5),
                  dict(th=64, rw=32, r=4, nt=256, mb1=1, mb2=1, stream=1, spart=2),
                  dict(th=32, rw=32, r=4, nt=128, mb1=2, mb2=2, stream=1, spart=1),
                  dict(th=64, rw=32, r=4, nt=128, mb1=2, mb2=2, stream=1)],
    # sm_90a first: ws (warps specialised, conv3 summed beside the chain), then wg (the fold chain on wgmma);
    # elsewhere 24-row chunks (fewer chunk barriers). config_for's default is the first tile that is not wg.
    ("fp16-fast", 1): [dict(th=66, rw=64, r=12, nt=640, mb1=1, mb2=1, fold=1, wg=1, ws=1),
                       dict(th=66, rw=64, r=24, nt=512, mb1=1, mb2=1, fold=1, wg=1),
                       dict(th=66, rw=64, r=24, nt=512, mb1=2, mb2=2, fold=1),
                       dict(th=66, rw=64, r=16, nt=512, mb1=2, mb2=2, fold=1),
                       dict(th=64, rw=64, r=16, nt=512, mb1=2, mb2=2, fold=1),
                       dict(th=64, rw=64, r=16, nt=512, mb1=2, mb2=2, fold=0),
                       dict(th=64, rw=64, r=16, nt=256, mb1=4, mb2=4, fold=0),
                       dict(th=64, rw=64, r=12, nt=512, mb1=1, mb2=1, fold=0)],
    ("fp16-fast", 3): [dict(th=32, rw=32, r=8, nt=128, mb1=2, mb2=4)],
    # sm_90a first: rows (fused_rows.cu, slow to build: built in the background, FusedConfig.slow_build), then the
    # 108-row fold tile (fewer halo rows), the 60-row fold tile, wg, spart 2; elsewhere conv2's weights streamed.
    # config_for's default is the first tile that is not wg.
    ("fp16-fast", 5): [dict(th=110, rw=64, r=3, nt=384, mb1=1, mb2=1, fold=1, wg=1, rows=1),
                       dict(th=108, rw=32, r=16, nt=256, mb1=2, mb2=4, stream=1, spart=2, fold=1, wg=1),
                       dict(th=60, rw=32, r=16, nt=256, mb1=2, mb2=4, stream=1, spart=2, fold=1, wg=1),
                       dict(th=60, rw=32, r=16, nt=256, mb1=2, mb2=4, stream=1, spart=1, wg=1),
                       dict(th=60, rw=32, r=16, nt=256, mb1=2, mb2=4, stream=1, spart=1),
                       dict(th=60, rw=32, r=16, nt=256, mb1=2, mb2=4, stream=1, spart=2, wg=1),
                       dict(th=64, rw=32, r=16, nt=256, mb1=2, mb2=4, stream=1, spart=1),
                       dict(th=64, rw=32, r=12, nt=256, mb1=2, mb2=3, stream=1, spart=1),
                       dict(th=64, rw=32, r=8, nt=256, mb1=2, mb2=2, stream=0),
                       dict(th=64, rw=32, r=8, nt=512, mb1=1, mb2=1, stream=0),
                       dict(th=32, rw=32, r=8, nt=256, mb1=2, mb2=2, stream=0)],
}
