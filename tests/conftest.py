"""Shared test fixtures: where the shared data lives, and the GPU skip."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _shared_data() -> Path:
    """$SRGPU_SHARED_DATA, else shared/data inside the checkout (how it travels to the GPU
    machine), else ../shared/data beside it (developers' machines and CI)."""
    env = os.environ.get("SRGPU_SHARED_DATA")
    if env:
        return Path(env)
    inside = ROOT / "shared" / "data"
    return inside if inside.is_dir() else ROOT.parent / "shared" / "data"


SHARED_DATA = _shared_data()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any(item.get_closest_marker("gpu") for item in items):
        return
    from srgpu.gpuinfo import cuda_status

    status = cuda_status()
    if status.usable:
        return
    skip = pytest.mark.skip(reason=f"no usable CUDA GPU: {status.reason}")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)
