"""Engines: CPU and GPU implementations of one interface (planes in, upscaled planes out)."""

from ..errors import EngineError
from .base import Engine
from .frames import PlaneSpec
from .options import GPUOptions
from .select import create_engine

__all__ = ["Engine", "EngineError", "GPUOptions", "PlaneSpec", "create_engine"]
