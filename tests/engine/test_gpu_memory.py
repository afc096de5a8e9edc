"""GPU memory per worker (issue 43): free memory read without a CUDA context (NVML, by PCI bus id),
and the default worker count held to what the GPUs' free memory takes."""

from __future__ import annotations

import os

import pytest

from srgpu.batch.pool import PIPELINE_BYTES, WorkerPlan, plan_workers, workers_per_gpu
from srgpu.engine.gpuinfo import cuda_status, nvml_free_memory


def test_workers_per_gpu_follow_free_memory() -> None:
    assert workers_per_gpu(0) == 1  # one at least: it says so itself if it cannot run
    assert workers_per_gpu(PIPELINE_BYTES - 1) == 1
    assert workers_per_gpu(2 * PIPELINE_BYTES) == 2
    assert workers_per_gpu(8 * 2**30) == 5  # an 8 GB card: 1.5 GiB a worker
    assert workers_per_gpu(6 * 2**30) == 4


def test_the_one_line_says_why_fewer() -> None:
    plan = WorkerPlan(("cuda:0", "cuda:0"), None, "2 per GPU: 3.1 GiB free on cuda:0, 1.5 GiB a worker")
    assert plan.describe() == "2 workers on cuda:0 (x2) (2 per GPU: 3.1 GiB free on cuda:0, 1.5 GiB a worker)"
    assert WorkerPlan(("cuda:0", "cuda:1")).describe() == "2 workers on cuda:0, cuda:1"


def test_no_nvml_is_none_not_an_error() -> None:
    assert nvml_free_memory(["not-a-bus-id"]) is None


@pytest.mark.gpu
def test_nvml_reads_free_memory_without_a_context() -> None:
    """NVML's free figure for each device (no context made) is what CUDA says once a context exists,
    less that context (at most ~1 GiB); every device of the host is named by its PCI bus id."""
    status = cuda_status()
    if not status.usable:
        pytest.skip(f"no usable CUDA GPU: {status.reason}")
    assert all(d.free_memory is None and d.pci_bus_id for d in status.devices)
    free = nvml_free_memory([d.pci_bus_id or "" for d in status.devices])
    assert free is not None and len(free) == len(status.devices)
    with_contexts = cuda_status(free_memory=True)
    for d, f in zip(with_contexts.devices, free):
        assert d.free_memory is not None and 0 < d.free_memory <= d.total_memory
        assert abs(f - d.free_memory) < 2**30, (d.index, f, d.free_memory)
    # an empty GPU of this size holds NVENC's two sessions per GPU (and more): nothing said
    plan = plan_workers("cuda:0", None, None, encoder="hevc_nvenc")
    assert plan.workers == 2 and plan.fewer is None


def test_a_worker_sees_its_own_gpu_alone() -> None:
    from srgpu.batch.pool import visible_device

    assert visible_device(1, None) == "1" and visible_device(0, "") == "0"
    assert visible_device(1, "2,3") == "3"  # the parent's cuda:1 is the host's GPU 3
    assert visible_device(0, "GPU-aa, GPU-bb") == "GPU-aa"


@pytest.mark.gpu
def test_a_worker_on_the_second_gpu_holds_no_memory_on_the_first(tmp_path) -> None:
    """Each worker holds a CUDA context on its own GPU only (nvidia-smi's compute apps)."""
    import subprocess
    import time

    from srgpu.batch.pool import EngineSpec, LocalPool, visible_device
    from srgpu.model import random_model

    status = cuda_status()
    if len(status.devices) < 2:
        pytest.skip("needs two GPUs")
    uuids = dict(line.split(", ") for line in subprocess.run(
        ["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"], capture_output=True, text=True,
        check=True).stdout.strip().splitlines())
    pool = LocalPool(EngineSpec(random_model("9-1-5", seed=3, scale=2), 2), ["cuda:1"])
    try:
        pool.start()
        deadline = time.monotonic() + 120
        apps: list[list[str]] = []
        pid = pool.pids()[0]
        while time.monotonic() < deadline:  # until its engine is made (its context holds memory)
            out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,gpu_uuid,used_memory",
                                  "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
            apps = [line.split(", ") for line in out.strip().splitlines() if line.startswith(f"{pid},")]
            if apps:
                time.sleep(3.0)  # the engine's start-up done
                out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,gpu_uuid,used_memory",
                                      "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
                apps = [line.split(", ") for line in out.strip().splitlines() if line.startswith(f"{pid},")]
                break
            time.sleep(0.5)
        if not apps:
            pytest.skip("nvidia-smi does not list this pid namespace's processes")
        # this process's cuda:1 as nvidia-smi numbers it (CUDA_VISIBLE_DEVICES may renumber them)
        physical = visible_device(1, os.environ.get("CUDA_VISIBLE_DEVICES"))
        assert {uuid for _, uuid, _ in apps} == {uuids.get(physical, physical)}, apps
    finally:
        pool.close(force=True)
