"""The fused kernels' shared memory per block, computed offline: a mirror of FfmaCfg / TcCfg in
fused_fp32.cu and fused_tc.cu (the runner checks it against the device's layout kernel), so the
tuner and CI can tell what fits a device without compiling."""

from __future__ import annotations

from ..launch import cdiv
from .tiles import FusedConfig


def shared_bytes(cfg: FusedConfig, f2: int) -> int:
    """Shared memory of an instantiation, mirroring FfmaCfg / TcCfg (checked against the device's
    layout kernel in the GPU tests)."""
    if cfg.rows:
        return rows_shared_bytes(cfg.th, cfg.r)
    h2 = f2 // 2
    cz = cfg.r + 4
    pz = cdiv(cz * cfg.rw, 32) * 32 + 4
    if cfg.kernel == "fp32":
        rw1p = cdiv(cfg.rw + 2 * h2, 4) * 4
        y0 = (cfg.th + 2 * (6 + h2)) * (rw1p + 8)
        p1 = cdiv((cfg.r + 2 * h2) * rw1p, 32) * 32 + 4
        common = 64 + 32 + 4 + 25 * 32 + (64 * 32 if f2 == 1 else 0)
        rings = (64 * p1 + 32 * cfg.r * cfg.rw) if f2 > 1 else 0
        bicubic_path = 81 * 64 + y0 + rings
        fold_path = 4 * 64 * 64 + 2 * (((cfg.th + 3) // 2 + 9) * (cfg.rw // 2 + 12) + 4) if cfg.fold else 0
        return 4 * (common + max(bicubic_path, fold_path) + 25 * pz)
    nspl = 2 if cfg.split else 1
    rw1 = cfg.rw + 2 * h2
    y0w = cdiv(rw1 + 10, 4) * 4
    py0 = (cfg.th + 2 * (6 + h2)) * (y0w // 2)
    py = py0 + (48 - py0 % 32) % 32
    w2s = f2 * 4 * 2 * 32 * 4  # one tap row of conv2's fragments (TcCfg W2S), words per copy
    nbuf = 3 if cfg.wg and cfg.spart > 1 else 2  # TcCfg W2NBUF
    w2sm = f2 * w2s if not cfg.stream else nbuf * (w2s // cfg.spart) if cfg.spart else w2s  # TcCfg W2SM
    common = nspl * (w2sm + 2 * 2 * 32 * 4) + 100
    a1 = nspl * (cfg.r + 2 * h2) * rw1 * 32 if f2 > 1 else 0
    bicubic_path = nspl * 6 * 4 * 32 * 4 + 2 * nspl * py + a1
    fold_path = 0
    if cfg.fold:  # LR planes for conv1's region: the Z region, or (f2 > 1) the A1 window (TcCfg LRR, LRWW)
        plr0 = ((cfg.th + 3 + 2 * h2) // 2 + 9) * ((rw1 + 3) // 4 + 5)
        fold_path = 4 * nspl * 4 * 4 * 32 * 4 + 2 * (plr0 + (48 - plr0 % 32) % 32) + a1
        if cfg.wg and f2 == 1:  # conv2's and the Z GEMM's weights once more, in wgmma's layout (TcCfg O_W2G, O_W3G)
            fold_path += 64 * 32 // 2 + 32 * 32 // 2
    return 4 * (common + max(bicubic_path, fold_path) + 25 * pz)


def rows_shared_bytes(th: int, slots: int) -> int:
    """fused_rows.cu RowsCfg<th, slots>::TOTAL * 4: conv2's and W3's weights (wgmma layouts), biases, the larger of
    the bicubic path's (conv1 fragments, Y planes) and the fold path's inputs (phase fragments, LR planes), the A1 ring,
    the Z ring (26 planes x 6 rows) and the output staging rows."""
    weights = 25 * 4 * 2 * 32 * 4 + 2 * 2 * 32 * 4 + 100
    py0 = (th + 16) * 40
    lr0 = ((th + 7) // 2 + 9) * 22
    bicubic_path = 6 * 4 * 32 * 4 + 2 * (py0 + (48 - py0 % 32) % 32)
    fold_path = 4 * 4 * 4 * 32 * 4 + 2 * (lr0 + (48 - lr0 % 32) % 32)
    a1 = cdiv(weights + max(bicubic_path, fold_path), 32) * 32
    ring = slots * 8 * (68 * 16 + 80) // 4
    return 4 * (a1 + ring + 26 * (6 * 64 + 4) + 6 * 64)
