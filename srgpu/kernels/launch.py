"""Launch configurations checked against a device's limits, before any launch.

Pure Python (no CuPy import) so the checks are tested in CI on machines without a GPU.
A kernel's own limit (``max_threads_per_block`` after register allocation) is only known once it
is compiled; :func:`validate_launch` takes it as an optional argument.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SHARED_LIMIT = 48 * 1024  # what a block gets without raising the kernel attribute


class LaunchError(ValueError):
    """A launch configuration the device cannot run; the message names the kernel."""


@dataclass(frozen=True)
class DeviceLimits:
    name: str
    compute_capability: str
    max_threads_per_block: int
    max_block_dims: tuple[int, int, int]
    max_grid_dims: tuple[int, int, int]
    max_shared_per_block: int  # default (48 KB)
    max_shared_per_block_optin: int  # after raising max_dynamic_shared_size_bytes
    multiprocessors: int
    total_memory: int

    @property
    def key(self) -> str:
        """Identifies the GPU model for caches (plans are per GPU model, not per card)."""
        return gpu_key(self.name, self.compute_capability)


def gpu_key(name: str, compute_capability: str) -> str:
    return f"{name} (sm_{compute_capability.replace('.', '')})"


# An H100 SXM as reported by CUDA, for tests and offline planning.
H100_LIMITS = DeviceLimits(
    name="NVIDIA H100 80GB HBM3", compute_capability="9.0", max_threads_per_block=1024,
    max_block_dims=(1024, 1024, 64), max_grid_dims=(2**31 - 1, 65535, 65535),
    max_shared_per_block=48 * 1024, max_shared_per_block_optin=227 * 1024, multiprocessors=132,
    total_memory=80 * 2**30)


@dataclass(frozen=True)
class Launch:
    """One kernel launch: grid and block in CUDA order (x, y, z) and dynamic shared memory bytes."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def needs_shared_optin(self) -> bool:
        return self.shared_bytes > DEFAULT_SHARED_LIMIT


def validate_launch(launch: Launch, limits: DeviceLimits, kernel_max_threads: int | None = None) -> None:
    """Raise LaunchError naming the kernel if the device (or the compiled kernel) cannot run it."""
    k = launch.kernel
    if any(d < 1 for d in launch.block) or any(d < 1 for d in launch.grid):
        raise LaunchError(f"kernel {k}: empty launch (grid {launch.grid}, block {launch.block})")
    if launch.threads > limits.max_threads_per_block:
        raise LaunchError(f"kernel {k}: {launch.threads} threads per block exceeds the device's "
                          f"{limits.max_threads_per_block}")
    if kernel_max_threads is not None and launch.threads > kernel_max_threads:
        raise LaunchError(f"kernel {k}: {launch.threads} threads per block exceeds the {kernel_max_threads} "
                          f"its registers allow")
    for axis, (b, mb) in enumerate(zip(launch.block, limits.max_block_dims)):
        if b > mb:
            raise LaunchError(f"kernel {k}: block dimension {'xyz'[axis]}={b} exceeds {mb}")
    for axis, (g, mg) in enumerate(zip(launch.grid, limits.max_grid_dims)):
        if g > mg:
            raise LaunchError(f"kernel {k}: grid dimension {'xyz'[axis]}={g} exceeds {mg}")
    if launch.shared_bytes > limits.max_shared_per_block_optin:
        raise LaunchError(f"kernel {k}: {launch.shared_bytes} bytes of shared memory per block exceeds the "
                          f"device's {limits.max_shared_per_block_optin}")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def round_up(a: int, b: int) -> int:
    return cdiv(a, b) * b
