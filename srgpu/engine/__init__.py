"""Engines: CPU and GPU implementations of one interface (planes in, upscaled planes out)."""

from .base import Engine, EngineError, PlaneSpec
from .select import create_engine

__all__ = ["Engine", "EngineError", "PlaneSpec", "create_engine"]
