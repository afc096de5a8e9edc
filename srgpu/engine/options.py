"""What a GPU engine is asked for, typed and checked once, where it is made: every layer below
(the engine, the tuner, the kernels) trusts it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .plans import KernelPlan, Precision, parse_precision


@dataclass(frozen=True)
class GPUOptions:
    """precision: auto | fp16 | fp32 (srgpu.engine.plans: auto and fp16 take the fastest plan that meets
        the accuracy bar for each output's bit depth; layer-wise plans are fp32 whatever it says).
    plan: run this plan for every frame size instead of choosing one.
    tile_budget_bytes: memory the strip intermediates may use (default: a share of free memory).
    cache_dir: the plan cache (default srgpu.engine.plans.cache_dir()).
    self_check: run each plan on a small random frame against the CPU reference before its first use
        (a fused plan at the output depth it serves; a given plan when the engine is made).
    notify: one line when a measurement starts and one when it ends (what a command-line user
        needs to know why nothing moves for a while)."""

    precision: Precision = "auto"
    plan: KernelPlan | None = None
    tile_budget_bytes: int | None = None
    cache_dir: Path | None = None
    self_check: bool = True
    notify: Callable[[str], None] | None = None

    def __post_init__(self) -> None:
        parse_precision(self.precision)  # EngineError naming the choices
