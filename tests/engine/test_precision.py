"""Which kernel arithmetics a user's --precision may use, per output bit depth (srgpu.engine.plans): the
accuracy bar decides, and the output's depth enters once, from the plane the engine writes."""

from __future__ import annotations

import numpy as np
import pytest

from srgpu.engine.options import GPUOptions
from srgpu.errors import EngineError
from srgpu.engine.plans import (ACCURACY_BAR, FLOAT_BITS, PRECISIONS, SERVES_UP_TO_BITS, arithmetics_for, output_bits, parse_precision, serves)

DEPTHS = (8, 10, 12, 16, FLOAT_BITS)


@pytest.mark.parametrize("dtype, max_value, bits", [
    (np.uint8, 255, 8), (np.uint16, 1023, 10), (np.uint16, 4095, 12), (np.uint16, 65535, 16),
    (np.float32, 1.0, FLOAT_BITS)])
def test_output_bits_from_the_plane(dtype: type, max_value: float, bits: int) -> None:
    assert output_bits(dtype, max_value) == bits


@pytest.mark.parametrize("bits", DEPTHS)
def test_auto_and_fp16_use_only_arithmetics_that_meet_the_bar_at_that_depth(bits: int) -> None:
    for precision in PRECISIONS:
        allowed = arithmetics_for(precision, bits)
        assert allowed and all(serves(a, bits) for a in allowed), (precision, bits, allowed)
    assert arithmetics_for("fp32", bits) == ("fp32",)
    assert "fp32" in arithmetics_for("auto", bits)


def test_fp16_fast_serves_8_bit_outputs_only() -> None:
    """The measured table (BENCHMARKS.md, "The accuracy bar per bit depth"): plain fp16 keeps 11
    bits, about one 8-bit level; auto takes it for 8-bit output and never for a deeper one."""
    assert "fp16-fast" in arithmetics_for("auto", 8) and "fp16-fast" in arithmetics_for("fp16", 8)
    for bits in DEPTHS[1:]:
        assert "fp16-fast" not in arithmetics_for("auto", bits)
        assert "fp16-fast" not in arithmetics_for("fp16", bits)
    # the split fp16 serves every integer depth; nothing but fp32 serves a float output
    for bits in (8, 10, 12, 16):
        assert "fp16" in arithmetics_for("auto", bits)
    assert arithmetics_for("auto", FLOAT_BITS) == ("fp32",) == arithmetics_for("fp16", FLOAT_BITS)
    assert set(SERVES_UP_TO_BITS) == {"fp32", "fp16", "fp16-fast"}


def test_the_bar_is_one_level_and_five_thousandths_of_a_db() -> None:
    assert ACCURACY_BAR.met(1, 0.005) and ACCURACY_BAR.met(0, -0.004)
    assert not ACCURACY_BAR.met(2, 0.0) and not ACCURACY_BAR.met(1, 0.0051) and not ACCURACY_BAR.met(0, -0.006)


def test_precision_is_checked_where_options_are_made() -> None:
    assert GPUOptions().precision == "auto"
    with pytest.raises(EngineError, match="unknown precision 'fp8': use fp32, fp16, auto"):
        GPUOptions(precision="fp8")  # type: ignore[arg-type]
    assert parse_precision("fp16") == "fp16"
