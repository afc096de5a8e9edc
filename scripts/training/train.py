#!/usr/bin/env python3
"""Train srgpu's own SRCNN weights (PyTorch; `pip install 'srgpu[train]'`).

Data: HR images (folders, or a pack made by scripts/training/pack_train_data.py), Y channel by MATLAB
rgb2ycbcr; or a crop pack (pack_train_data.py --crops; scripts/training/crop_pack.py): HR crops to train
on and two validation splits of images held out of the crops. A crop is treated as the part of its
image it is: patches keep cut_margin(scale) pixels away from the edges where it was cut (--cut-margin),
so that each is a patch of the whole image; at the image's own edges they go to the border as before. Inputs are made with exactly the evaluation's degradation: srgpu.resize.imresize
(MATLAB bicubic, antialiased) down by 1/s and back up by s, on modcropped HR planes. Extra
training planes come from HR images downscaled by the --hr-scales factors (same imresize).
Augmentation: the 8 flips/transposes, which commute exactly with that degradation for
modcropped planes (the kernel and the pixel-centre mapping are symmetric).

The network is the inference network: 'same' convolutions with replicate padding at every
layer. The loss is MSE on each patch's centre, away from the patch's cut edges, so every
pixel it scores saw the same context it sees at inference; a step computes that centre alone,
with 'valid' convolutions (the same values and gradients without the padded border's work).

Real-source models (--degrade jpeg:60-95 --degrade h264:18-30 --clean-fraction 0.2 --variants 4): the LR
image is rounded to 8 bits and compressed (srgpu.tools.degrade: OpenCV JPEG, all-intra libx264/libx265) before
the bicubic upscale; every training and validation plane gets --variants versions, each clean or
compressed at a quality drawn at random (seeded: scripts/training/degraded_data.py), made once in the
data preparation (and kept with --degraded-cache DIR). The flips/transposes then act on compressed
patches too (the codecs are not symmetric, but the artefacts stay plausible). Set5 is reported clean,
at jpeg:75 and at h264:23; the model's metadata records the mix under "degradation".

A validation split (every --val-every-nth plane of the sorted list, original scale only; a crop
pack's split 1) drives model selection; a crop pack's split 2 (images unlike the rest) is validated
and reported beside it, never chosen on; Set5, if given, is only reported. Seeded; the result is deterministic up to
cuDNN's non-deterministic kernels (set --deterministic to forbid them).

    python3 scripts/training/train.py --arch 9-1-5 --scale 2 --data .pack/train_y.npz \
        --iters 60000 --out weights/srcnn_9-1-5_x2.npz --set5 ../shared/data/eval/Set5

    python3 scripts/training/train.py --arch 9-5-5 --scale 4 --data .pack/i42_crops.npz ...  (a crop pack)

A long schedule can run in pieces (e.g. on a machine lent for ten minutes at a time): with
--time-limit S the run stops at the last validation that fits in S seconds, leaving the best model
so far in --out and its whole state (weights, Adam, RNGs, history) in --state; the same command
with --resume goes on as if it had never stopped: on the CPU, or on a GPU with --deterministic,
bit for bit (a test checks the CPU case); a resume refuses other settings, another device type or
other code.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from srgpu.tools.evaluate import evaluate_folder, image_files, luma_uint8, mean_scores  # noqa: E402
from srgpu.images.files import read_image  # noqa: E402
from srgpu.tools.metrics import psnr, shave  # noqa: E402
from srgpu.color import quantize  # noqa: E402
from srgpu.tools.degrade import parse_degradation  # noqa: E402
from srgpu.model import SRCNNModel  # noqa: E402
from srgpu.resize import imresize  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import binary_net  # noqa: E402  (beside this script: --binary)
from binary_net import save_model  # noqa: E402  (srgpu .npz, float or binarized)
import crop_pack  # noqa: E402  (beside this script: crop packs)
from degraded_data import TRAIN, VAL, VAL2, DegradeMix, cache_settings, cached_variants, hr_plane, make_variants, upscale_lr  # noqa: E402


# ---------------------------------------------------------------- data


def load_planes(sources: list[Path]) -> tuple[list[np.ndarray], list[str]]:
    planes, names = [], []
    for src in sources:
        if src.suffix == ".npz":
            with np.load(src, allow_pickle=False) as z:
                flat, shapes, nm = z["y"], z["shapes"], z["names"]
            off = 0
            for (h, w), n in zip(shapes, nm):
                planes.append(flat[off : off + h * w].reshape(h, w))
                names.append(str(n))
                off += h * w
        else:
            for p in image_files(src):
                planes.append(luma_uint8(read_image(p)))
                names.append(f"{src.name}/{p.name}")
    order = np.argsort(names)
    return [planes[i] for i in order], [names[i] for i in order]


def make_pair(args: tuple[np.ndarray, int, float]) -> tuple[np.ndarray, np.ndarray]:
    """HR uint8 plane -> (bicubic input, HR target) float32, the evaluation's degradation."""
    plane, scale, hr_scale = args
    hr = hr_plane(plane, scale, hr_scale)
    lr = imresize(hr, 1.0 / scale)
    bic = imresize(lr, float(scale))
    return bic.astype(np.float32), hr.astype(np.float32)


Margins = tuple[int, int, int, int]  # pixels kept clear at the top, bottom, left and right
NO_MARGINS: Margins = (0, 0, 0, 0)


def patch_origins(shape: tuple[int, int], size: int, stride: int, margins: Margins = NO_MARGINS) -> list[tuple[int, int]]:
    """Top-left corners of the patches of ``size`` drawn from a plane, ``stride`` apart, ``margins`` clear."""
    top, bottom, left, right = margins
    h, w = shape
    return [(r, c) for r in range(top, h - bottom - size + 1, stride) for c in range(left, w - right - size + 1, stride)]


def edge_margins(edges: tuple[bool, bool, bool, bool], margin: int) -> Margins:
    """``margin`` at each cut edge (False), none at the image's own edges (True)."""
    return tuple(0 if own else margin for own in edges)  # type: ignore[return-value]


def extract_patches(pairs: list[tuple[np.ndarray, np.ndarray]], size: int, stride: int, halo: int = 0,
                    margins: list[Margins] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Input patches of ``size`` and their targets' scored centres (``halo`` cut off every side)."""
    x, y = patches_to_device(pairs, size, stride, halo, margins, torch.device("cpu"))
    return x[:, 0].numpy(), y[:, 0].numpy()


def patches_to_device(pairs: list[tuple[np.ndarray, np.ndarray]], size: int, stride: int, halo: int,
                      margins: list[Margins] | None, device: torch.device,
                      chunk: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    """extract_patches's patches as (N, 1, size, size) and (N, 1, size - 2 halo, ...) tensors on ``device``,
    filled a chunk at a time (the host never holds them all at once)."""
    margins = margins or [NO_MARGINS] * len(pairs)
    origins = [patch_origins(hr.shape, size, stride, m) for (_, hr), m in zip(pairs, margins)]
    n, inner = sum(len(o) for o in origins), size - 2 * halo
    x_all = torch.empty((n, 1, size, size), dtype=torch.float32, device=device)
    y_all = torch.empty((n, 1, inner, inner), dtype=torch.float32, device=device)
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    done = 0

    def flush() -> None:
        nonlocal done
        if xs:
            x_all[done : done + len(xs), 0] = torch.from_numpy(np.stack(xs)).to(device)
            y_all[done : done + len(ys), 0] = torch.from_numpy(np.stack(ys)).to(device)
            done += len(xs)
            xs.clear()
            ys.clear()

    for (bic, hr), corners in zip(pairs, origins):
        for r, c in corners:
            xs.append(bic[r : r + size, c : c + size])
            ys.append(hr[r + halo : r + size - halo, c + halo : c + size - halo])
            if len(xs) == chunk:
                flush()
    flush()
    return x_all, y_all


def degraded_pairs(clean: list[tuple[np.ndarray, np.ndarray]], lrs: list[list[np.ndarray | None]], scale: int,
                   pool: ProcessPoolExecutor) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every variant of every source as a (bicubic input, HR target) pair, source by source: a
    clean variant is the source's clean pair, a compressed one its LR plane upscaled."""
    todo = [lr for row in lrs for lr in row if lr is not None]
    ups = iter(pool.map(upscale_lr, [(lr, scale) for lr in todo], chunksize=8))
    return [pair if lr is None else (next(ups), pair[1]) for pair, row in zip(clean, lrs) for lr in row]


# ---------------------------------------------------------------- network


class SRCNN(binary_net.ThreeLayers):
    def __init__(self, f1: int, f2: int, f3: int, n1: int = 64, n2: int = 32) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, n1, f1)
        self.conv2 = torch.nn.Conv2d(n1, n2, f2)
        self.conv3 = torch.nn.Conv2d(n2, 1, f3)
        for conv in (self.conv1, self.conv2):
            torch.nn.init.kaiming_normal_(conv.weight, nonlinearity="relu")
            torch.nn.init.zeros_(conv.bias)
        torch.nn.init.normal_(self.conv3.weight, std=1e-3)
        torch.nn.init.zeros_(self.conv3.bias)

    def to_model(self, scale: int, name: str, metadata: dict) -> SRCNNModel:
        def a(t: torch.Tensor) -> np.ndarray:
            return np.ascontiguousarray(t.detach().cpu().contiguous().numpy(), dtype=np.float32)

        return SRCNNModel(
            conv1_weight=a(self.conv1.weight), conv1_bias=a(self.conv1.bias),
            conv2_weight=a(self.conv2.weight), conv2_bias=a(self.conv2.bias),
            conv3_weight=a(self.conv3.weight), conv3_bias=a(self.conv3.bias),
            scale=scale, name=name, metadata=metadata,
        )


def dihedral(x: torch.Tensor, k: int) -> torch.Tensor:
    if k & 1:
        x = x.flip(-1)
    if k & 2:
        x = x.flip(-2)
    if k & 4:
        x = x.transpose(-1, -2)
    return x


@torch.no_grad()
def validate(net: SRCNN, pairs: list[tuple[np.ndarray, np.ndarray]], scale: int, device: torch.device) -> float:
    """Mean Y-PSNR on the validation planes, quantised and shaved as the evaluation does (fp32)."""
    tf32 = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        return _validate(net, pairs, scale, device)
    finally:
        torch.backends.cudnn.allow_tf32 = tf32


def _validate(net: SRCNN, pairs: list[tuple[np.ndarray, np.ndarray]], scale: int, device: torch.device) -> float:
    net.eval()
    scores = []
    for bic, hr in pairs:
        out = net(torch.from_numpy(bic)[None, None].to(device))[0, 0].double().cpu().numpy()
        scores.append(psnr(shave(quantize(hr, np.uint8), scale), shave(quantize(out, np.uint8), scale)))
    net.train()
    return float(np.mean(scores))


def git_commit() -> str:
    """The commit the script runs from ($SRGPU_COMMIT where the copy has no .git, as on the GPU machine)."""
    if os.environ.get("SRGPU_COMMIT"):
        return os.environ["SRGPU_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
    except Exception:
        return "unknown"


class TrainStep:
    """One optimiser step on a batch; --amp runs the convolutions in fp16/bf16 (fp32 weights, loss and
    update), which cuDNN runs several times faster on tensor cores than TF32."""

    def __init__(self, net: SRCNN, opt: torch.optim.Optimizer, patch: int, amp: str, device: torch.device) -> None:
        self.net, self.opt, self.patch, self.device = net, opt, patch, device
        self.dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(amp)
        self.scaler = torch.amp.GradScaler(device.type, enabled=amp == "fp16")
        if self.dtype is not None:
            net.to(memory_format=torch.channels_last)

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.dtype is not None:
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast(self.device.type, dtype=self.dtype or torch.float32, enabled=self.dtype is not None):
            out = self.net.forward_centre(x)  # the scored centre only (patch x patch)
        loss = F.mse_loss(out.float(), y)
        self.opt.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.opt)
        self.scaler.update()
        return loss.detach()


# what a resumed run must share with the run it continues: everything that shapes the schedule,
# the data or the network (the rest, e.g. --workers, --log, --time-limit, may change)
RESUME_KEYS = ("arch", "scale", "data", "iters", "batch", "patch", "stride", "hr_scales", "lr", "lr_final", "warmup",
               "val_every_nth", "val_interval", "seed", "init", "tf32", "amp", "deterministic", "device_type", "binary",
               "degrade", "clean_fraction", "variants", "cut_margin", "data_sha256")


def resume_settings(args: argparse.Namespace) -> dict:
    """The settings a resumed run must share with the saved one, in comparable form."""
    out = {k: (str(v) if isinstance(v, Path) else [str(d) for d in v] if k == "data" else v)
           for k, v in vars(args).items() if k in RESUME_KEYS}
    out["device_type"] = torch.device(args.device).type  # the RNG streams differ between CPU and CUDA
    pack = crop_pack_path(args.data)
    # a crop pack: its contents (a pack remade under the same name is other data) and the margin used
    out["data_sha256"] = file_sha256(pack) if pack else None
    out["cut_margin"] = effective_cut_margin(args) if pack else None
    if not args.degrade:  # a clean run: the mix's options mean nothing (and states saved before them match)
        out.update(degrade=None, clean_fraction=None, variants=None)
    return out


def crop_pack_path(sources: list[Path]) -> Path | None:
    """The crop pack among --data, if it is one (a crop pack comes alone)."""
    packs = [s for s in sources if crop_pack.is_crop_pack(s)]
    if packs and len(sources) > 1:
        raise SystemExit(f"--data: a crop pack ({packs[0]}) holds its own validation splits and comes alone")
    return packs[0] if packs else None


def effective_cut_margin(args: argparse.Namespace) -> int:
    return crop_pack.cut_margin(args.scale) if args.cut_margin is None else args.cut_margin


_SHA256: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """A file's SHA-256 (once per file and modification: the state is saved at every validation)."""
    import hashlib

    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key in _SHA256:
        return _SHA256[key]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    _SHA256[key] = h.hexdigest()
    return _SHA256[key]


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def save_state(args: argparse.Namespace, done: int, net: SRCNN, opt: torch.optim.Optimizer, step: "TrainStep",
               gen: torch.Generator, aug_rng: np.random.Generator, best: tuple, history: list, init_meta: dict | None,
               segments: list[dict], history2: list) -> None:
    """Everything --resume needs to go on as if never stopped; written to a temporary name, then renamed."""
    state = {
        "args": resume_settings(args),
        "iteration": done, "net": net.state_dict(), "opt": opt.state_dict(), "scaler": step.scaler.state_dict(),
        "gen": gen.get_state(), "aug_rng": aug_rng.bit_generator.state, "best": best, "history": history,
        "init_meta": init_meta, "segments": segments, "history2": history2,
    }
    tmp = args.state.with_name(f".{args.state.name}.{os.getpid()}.tmp")
    torch.save(state, tmp)
    os.replace(tmp, args.state)


def check_resumable(args: argparse.Namespace, device: torch.device) -> dict:
    """The saved state, if this run may continue it (refused before any data is made)."""
    if not args.state.is_file():
        raise SystemExit(f"--resume: no training state at {args.state}")
    state = torch.load(args.state, map_location=device, weights_only=False)
    mine = resume_settings(args)
    differ = [f"--{k.replace('_', '-')} {state['args'].get(k)} (now {mine[k]})" for k in RESUME_KEYS
              if state["args"].get(k) != mine[k]]
    if differ:
        raise SystemExit(f"--resume: {args.state} was saved by a run with other settings: {'; '.join(differ)}")
    commits = {seg["commit"] for seg in state["segments"]} - {"unknown"}
    if commits and git_commit() not in commits | {"unknown"}:
        raise SystemExit(f"--resume: {args.state} was trained by commit {', '.join(sorted(commits))}, this is "
                         f"{git_commit()}: resume with the same code (or set SRGPU_COMMIT if this copy has no .git)")
    return state


def load_state(state: dict, net: SRCNN, opt: torch.optim.Optimizer, step: "TrainStep",
               gen: torch.Generator, aug_rng: np.random.Generator) -> tuple:
    net.load_state_dict(state["net"])
    opt.load_state_dict(state["opt"])
    step.scaler.load_state_dict(state["scaler"])
    gen.set_state(state["gen"].cpu() if hasattr(state["gen"], "cpu") else state["gen"])
    aug_rng.bit_generator.state = state["aug_rng"]
    best = tuple(state["best"])
    return (state["iteration"], best, state["history"], state["init_meta"], state["segments"],
            state.get("history2", []))


def make_optimizer(net: SRCNN, lr: float) -> torch.optim.Adam:
    # the last layer learns slower, as in the paper (1e-4 vs 1e-5 there)
    return torch.optim.Adam([
        {"params": list(net.conv1.parameters()) + list(net.conv2.parameters()), "lr_mult": 1.0},
        {"params": list(net.conv3.parameters()), "lr_mult": 0.1},
    ], lr=lr)


# ---------------------------------------------------------------- main

SET5_COMPRESSED = ("jpeg:75", "h264:23")  # issue 19's targets for a real-source model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="9-1-5", help="f1-f2-f3, e.g. 9-1-5 or 9-5-5")
    ap.add_argument("--scale", type=int, required=True)
    ap.add_argument("--data", type=Path, nargs="+", required=True, help="HR image folders or a .npz pack")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--iters", type=int, default=60000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--patch", type=int, default=48, help="scored centre size of a patch")
    ap.add_argument("--stride", type=int, default=24)
    ap.add_argument("--hr-scales", type=float, nargs="+", default=[1.0, 0.8, 0.6])
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--lr-final", type=float, default=1e-6)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--val-every-nth", type=int, default=15,
                    help="every n-th plane is held out (not with a crop pack, which holds its own splits)")
    ap.add_argument("--cut-margin", type=int,
                    help="crop packs: pixels patches keep from a crop's cut edges (default: crop_pack.cut_margin, "
                         "3 x scale + 4, beyond which a patch is the whole image's; 0 treats crops as images)")
    ap.add_argument("--val-interval", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--set5", type=Path, help="report (never select on) Set5 PSNR at the end")
    ap.add_argument("--init", type=Path, help="start from an srgpu .npz of the same architecture")
    ap.add_argument("--binary", choices=binary_net.BINARIZABLE,
                    help="binarize this layer (signs of weights and activations, learned thresholds and scales, "
                         "straight-through estimator; scripts/training/binary_net.py); needs --init")
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--no-tf32", dest="tf32", action="store_false",
                    help="train in full fp32 (default: TF32 convolutions, 2-3x faster; evaluation is fp32)")
    ap.add_argument("--amp", choices=["off", "fp16", "bf16"], default="off",
                    help="mixed-precision training steps (autocast, channels_last); validation stays fp32")
    ap.add_argument("--log", type=Path)
    ap.add_argument("--state", type=Path,
                    help="the resumable training state (weights, optimiser, RNGs, history), rewritten at "
                         "every validation (default: OUT with .state.pt)")
    ap.add_argument("--resume", action="store_true",
                    help="continue the run saved in --state exactly where it stopped (same schedule)")
    ap.add_argument("--time-limit", type=float,
                    help="seconds: stop at the last validation that fits (the state is saved; --resume goes on)")
    real = ap.add_argument_group("real-source inputs (LR images compressed as real ones are; srgpu.tools.degrade)")
    real.add_argument("--degrade", action="append", metavar="CODEC:Q[-Q]",
                      help="compress the LR inputs: jpeg:LOW-HIGH, h264:LOW-HIGH (CRF), hevc:LOW-HIGH, repeatable "
                           "(e.g. --degrade jpeg:60-95 --degrade h264:18-30); each variant draws one spec and a "
                           "quality; the validation planes get the same mix (seeded)")
    real.add_argument("--clean-fraction", type=float, default=0.2,
                      help="with --degrade: probability that a variant stays clean (default 0.2)")
    real.add_argument("--variants", type=int, default=4,
                      help="with --degrade: variants made of every training and validation plane (default 4)")
    real.add_argument("--degraded-cache", type=Path, metavar="DIR",
                      help="keep the compressed LR planes in DIR (one file per scale and settings), made once "
                           "and read by every later run with the same settings")
    real.add_argument("--prepare-only", action="store_true",
                      help="make the data (with --degraded-cache: the cache file) and stop")
    args = ap.parse_args()
    if args.binary and not args.init:
        ap.error("--binary trains a binarized copy of a full-precision model: give it with --init")
    t_main = time.time()  # --time-limit counts everything: start-up, data, validation
    if args.state is None:
        args.state = args.out.with_suffix(".state.pt")

    f1, f2, f3 = (int(v) for v in args.arch.split("-"))
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    device = torch.device(args.device)
    torch.backends.cudnn.benchmark = not args.deterministic
    torch.backends.cudnn.deterministic = args.deterministic
    # TF32 only speeds up training; validation, Set5 and inference run in fp32
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    log_f = open(args.log, "a") if args.log else None

    def log(msg: str) -> None:
        line = f"[{args.arch} x{args.scale}] {msg}"
        print(line, flush=True)
        if log_f:
            log_f.write(line + "\n")
            log_f.flush()

    saved = check_resumable(args, device) if args.resume else None
    t0 = time.time()
    pack_path = crop_pack_path(args.data)
    pack_meta: dict | None = None
    if pack_path is not None:
        pack = crop_pack.read_pack(pack_path)
        train, val, val2 = (pack.splits[k] for k in crop_pack.SPLITS)
        train_planes, val_planes, val2_planes = train.planes, val.planes, val2.planes
        margin = effective_cut_margin(args)
        train_margins = [edge_margins(e, margin) for e in train.edges()]
        # the degraded-variant cache's key: every plane, named by its split
        names = [f"{k}:{n}" for k in crop_pack.SPLITS for n in pack.splits[k].names]
        planes = train_planes + val_planes + val2_planes
        pack_meta = {k: pack.meta.get(k) for k in ("seed", "crop", "max_mb", "val_every_nth", "val2_every",
                                                   "val2_sections", "val_max_side", "train_images",
                                                   "train_images_cropped", "megapixels", "commit")}
        pack_meta.update(path=str(pack_path), sha256=file_sha256(pack_path), train_crops=len(train),
                         cut_margin=margin)
        log(f"crop pack {pack_path}: {len(train)} training crops ({train.megapixels():.1f} Mpx), validation "
            f"split 1 {len(val)} planes (chooses), split 2 {len(val2)} planes (reported); patches keep {margin} px "
            f"from cut edges" + ("" if args.val_every_nth == 15 else "; --val-every-nth is the pack's own"))
        del pack
    else:
        planes, names = load_planes(args.data)
        val_idx = set(range(0, len(planes), args.val_every_nth))
        train_planes = [p for i, p in enumerate(planes) if i not in val_idx]
        val_planes = [p for i, p in enumerate(planes) if i in val_idx]
        val2_planes = []
        train_margins = [NO_MARGINS] * len(train_planes)
    jobs = [(p, args.scale, hs) for p in train_planes for hs in args.hr_scales]
    job_margins = [m for m in train_margins for _ in args.hr_scales]
    val_jobs = [(p, args.scale, 1.0) for p in val_planes]
    val2_jobs = [(p, args.scale, 1.0) for p in val2_planes]
    mix: DegradeMix | None = None
    degradation: dict | None = None
    with ProcessPoolExecutor(args.workers) as pool:
        if args.degrade:
            try:
                mix = DegradeMix.parse(args.degrade, args.clean_fraction, args.variants, args.seed)
            except ValueError as e:
                raise SystemExit(f"train.py: {e}") from None
            n_hs = len(args.hr_scales)
            train_keys = [(TRAIN, args.scale, i // n_hs, i % n_hs) for i in range(len(jobs))]
            val_keys = [(VAL, args.scale, i) for i in range(len(val_jobs))]
            val2_keys = [(VAL2, args.scale, i) for i in range(len(val2_jobs))]
            parts = ["train", "val", "val2"] if pack_path is not None else None
            t1 = time.time()
            variants = cached_variants(
                args.degraded_cache,
                cache_settings(mix, args.scale, args.hr_scales, args.val_every_nth, names, planes, parts),
                lambda: {"train": make_variants(jobs, train_keys, mix, pool),
                         "val": make_variants(val_jobs, val_keys, mix, pool),
                         **({"val2": make_variants(val2_jobs, val2_keys, mix, pool)} if parts else {})}, log)
            degradation = {**mix.describe(), "train_variants": variants["train"].counts(),
                           "val_variants": variants["val"].counts(),
                           **({"val2_variants": variants["val2"].counts()} if parts else {})}
            log(f"degraded variants ({time.time() - t1:.1f}s): train {degradation['train_variants']}, "
                f"validation {degradation['val_variants']}")
        if args.prepare_only:
            log(f"data ready in {time.time() - t0:.1f}s (--prepare-only: stopping here)")
            return
        train_pairs = list(pool.map(make_pair, jobs, chunksize=8))
        val_pairs = list(pool.map(make_pair, val_jobs))
        val2_pairs = list(pool.map(make_pair, val2_jobs))
        if mix is not None:  # every source's variants in place of its clean pair
            train_pairs = degraded_pairs(train_pairs, variants["train"].lr, args.scale, pool)
            job_margins = [m for m, row in zip(job_margins, variants["train"].lr) for _ in row]
            val_pairs = degraded_pairs(val_pairs, variants["val"].lr, args.scale, pool)
            if val2_pairs:
                val2_pairs = degraded_pairs(val2_pairs, variants["val2"].lr, args.scale, pool)
    net = binary_net.make_net(args.binary, f1, f2, f3, SRCNN).to(device)
    halo = net.halo
    size = args.patch + 2 * halo
    x_all, y_all = patches_to_device(train_pairs, size, args.stride, halo, job_margins, device)
    n_patches = len(x_all)
    del train_pairs  # the host copies (several GB with --degrade)
    if n_patches == 0:
        raise SystemExit(f"no training patch of {size}px fits in the training planes at these HR scales "
                         f"(a crop pack's crops may be too small for --patch {args.patch}, --hr-scales "
                         f"{min(args.hr_scales)} and their cut margins)")
    log(f"{len(train_planes)} train planes x {len(args.hr_scales)} HR scales"
        f"{f' x {args.variants} variants' if mix else ''} -> {n_patches} patches of {size}px "
        f"({(x_all.numel() + y_all.numel()) * 4 / 1e9:.1f} GB); {len(val_pairs)} validation planes"
        f"{f' + {len(val2_pairs)} of split 2' if val2_pairs else ''}; data ready in {time.time() - t0:.1f}s")

    init_meta: dict | None = None
    if args.init and not args.resume and args.binary:
        init_meta = binary_net.initialise(net, args.init, x_all[torch.linspace(0, len(x_all) - 1, 256).long()], log)
    elif args.init and not args.resume:  # a resumed run takes its weights (and init provenance) from the state
        from srgpu.model import load_npz

        init = load_npz(args.init)
        # the chain of runs stays in the provenance (without the long validation history)
        init_meta = {k: v for k, v in init.metadata.items() if k != "validation_history"}
        with torch.no_grad():
            for i, conv in enumerate((net.conv1, net.conv2, net.conv3), start=1):
                conv.weight.copy_(torch.from_numpy(getattr(init, f"conv{i}_weight")))
                conv.bias.copy_(torch.from_numpy(getattr(init, f"conv{i}_bias")))
        log(f"initialised from {args.init}")

    opt = make_optimizer(net, args.lr)
    step = TrainStep(net, opt, args.patch, args.amp, device)

    def lr_at(it: int) -> float:
        if it < args.warmup:
            return args.lr * (it + 1) / args.warmup
        p = (it - args.warmup) / max(1, args.iters - args.warmup)
        return args.lr_final + 0.5 * (args.lr - args.lr_final) * (1 + math.cos(math.pi * p))

    gen = torch.Generator(device=device).manual_seed(args.seed)
    aug_rng = np.random.default_rng(args.seed)
    best: tuple[float, int, dict | None] = (-1.0, 0, None)
    history: list[tuple[int, float]] = []
    history2: list[tuple[int, float]] = []  # validation split 2, reported only
    segments: list[dict] = []  # one per invocation of this run (--resume adds one)

    def metadata(done: int) -> dict:
        return {
            "provenance": "trained by srgpu scripts/training/train.py",
            "data": [str(d) for d in args.data],
            "train_planes": len(train_planes), "val_planes": len(val_pairs),
            "hr_scales": args.hr_scales, "patches": int(n_patches),
            "iterations": args.iters, "iterations_done": done, "selected_iteration": best[1],
            "batch": args.batch, "patch": args.patch, "tf32": args.tf32, "amp": args.amp, "lr": args.lr,
            "lr_final": args.lr_final, "warmup": args.warmup, "seed": args.seed,
            # a run in pieces is described by its first piece; every piece is under "segments"
            "commit": segments[0]["commit"] if segments else git_commit(),
            "device": device_name(device),
            "train_seconds": round(sum(seg.get("seconds", 0.0) for seg in segments), 1),
            "validation_psnr": round(best[0], 4),
            "validation_history": history,
            **({"val2_planes": len(val2_pairs), "validation2_psnr": dict(history2).get(best[1]),
                "validation2_history": history2} if val2_pairs else {}),
            **({"data_pack": pack_meta} if pack_meta else {}),
            "command": segments[0]["command"] if segments else " ".join(sys.argv),
            "segments": segments, "initialised_from": init_meta, "binary": args.binary,
            **({"degradation": degradation} if degradation else {}),
        }

    def best_model(meta: dict) -> SRCNNModel:
        snapshot = binary_net.make_net(args.binary, f1, f2, f3, SRCNN)
        snapshot.load_state_dict({k_: t.cpu() for k_, t in best[2].items()})
        variant = ("-real" if mix else "") + ("-binary" if args.binary else "")
        return snapshot.to_model(args.scale, f"srgpu-srcnn-{args.arch}{variant}-x{args.scale}", meta)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    start = 0
    if args.resume:
        start, best, history, init_meta, segments, history2 = load_state(saved, net, opt, step, gen, aug_rng)
        log(f"resumed from {args.state} at iteration {start} (best {best[0]:.3f} dB @ {best[1]})")
    elif args.init:  # a continued run never ends worse than where it started
        v0 = validate(net, val_pairs, args.scale, device)
        history.append((0, round(v0, 4)))
        if val2_pairs:
            history2.append((0, round(validate(net, val2_pairs, args.scale, device), 4)))
        best = (v0, 0, {k_: t.detach().clone() for k_, t in net.state_dict().items()})
        log(f"iter 0: val {v0:.3f} dB (the initial model)" + (f", split 2 {history2[-1][1]:.3f} dB" if val2_pairs else ""))
    if start < args.iters:
        segments.append({"command": " ".join(sys.argv), "commit": git_commit(), "device": device_name(device),
                         "from_iteration": start, "to_iteration": start})
    else:
        log(f"{args.state} is complete ({start} iterations): writing the final model only")
    t_segment = time.time()
    stopped = False
    for it in range(start, args.iters):
        lr = lr_at(it)
        for g in opt.param_groups:
            g["lr"] = lr * g["lr_mult"]
        idx = torch.randint(0, x_all.shape[0], (args.batch,), device=device, generator=gen)
        k = int(aug_rng.integers(8))
        x = dihedral(x_all[idx], k)
        y = dihedral(y_all[idx], k)
        loss = step(x, y)
        if (it + 1) % args.val_interval == 0 or it + 1 == args.iters:
            v = validate(net, val_pairs, args.scale, device)
            history.append((it + 1, round(v, 4)))
            if val2_pairs:  # reported beside split 1, never chosen on
                history2.append((it + 1, round(validate(net, val2_pairs, args.scale, device), 4)))
            segments[-1]["to_iteration"] = it + 1
            segments[-1]["seconds"] = round(time.time() - t_segment, 1)
            if v > best[0]:
                best = (v, it + 1, {k_: t.detach().clone() for k_, t in net.state_dict().items()})
                # a checkpoint of the best so far, so an interrupted run still leaves a usable model
                save_model(best_model(metadata(it + 1)), args.out)
            save_state(args, it + 1, net, opt, step, gen, aug_rng, best, history, init_meta, segments, history2)
            el = time.time() - t_segment
            done_here = it + 1 - start
            log(f"iter {it + 1}/{args.iters} lr {lr:.2e} loss {float(loss.detach()):.3e} val {v:.3f} dB "
                f"(best {best[0]:.3f} @ {best[1]})"
                + (f" split 2 {history2[-1][1]:.3f} dB" if val2_pairs else "")
                + f" {el:.0f}s {1000 * el / done_here:.2f} ms/iter")
            t_interval = el / done_here * args.val_interval
            if (args.time_limit is not None and it + 1 < args.iters
                    and time.time() - t_main + t_interval > args.time_limit):
                stopped = True
                break
    if stopped:
        save_model(best_model(metadata(segments[-1]["to_iteration"])), args.out)
        log(f"stopped by --time-limit at iteration {segments[-1]['to_iteration']} of {args.iters}; "
            f"{args.out} holds the best so far; continue with --resume --state {args.state}")
        print(json.dumps({"out": str(args.out), "stopped_at": segments[-1]["to_iteration"], "state": str(args.state),
                          "validation_psnr": round(best[0], 4), "selected_iteration": best[1],
                          **({"validation2_psnr": dict(history2).get(best[1])} if val2_pairs else {})}), flush=True)
        return

    if start < args.iters:
        segments[-1]["to_iteration"] = args.iters
        segments[-1]["seconds"] = round(time.time() - t_segment, 1)
    meta = metadata(args.iters)
    model = best_model(meta)
    if args.set5:
        bic, sr = mean_scores(list(evaluate_folder(args.set5, model, args.scale, binary_net.sr_function(model))))
        meta.update(set5_psnr=round(sr.psnr, 4), set5_bicubic_psnr=round(bic.psnr, 4), set5_ssim=round(sr.ssim, 5))
        log(f"Set5 (report only): bicubic {bic.psnr:.3f} dB, SRCNN {sr.psnr:.3f} dB, SSIM {sr.ssim:.4f}")
        if mix is not None:  # the real-source model's targets, reported (never used to choose)
            meta["set5_compressed"] = {}
            for spec in SET5_COMPRESSED:
                try:
                    bic, sr = mean_scores(list(evaluate_folder(args.set5, model, args.scale,
                                                               binary_net.sr_function(model),
                                                               degradation=parse_degradation(spec))))
                except Exception as e:  # a report only (e.g. no ffmpeg where the cached data made it unneeded)
                    log(f"Set5 {spec} not reported: {' '.join(str(e).split())[:200]}")
                    continue
                meta["set5_compressed"][spec] = {"bicubic_psnr": round(bic.psnr, 4), "psnr": round(sr.psnr, 4),
                                                 "ssim": round(sr.ssim, 5)}
                log(f"Set5 {spec} (report only): bicubic {bic.psnr:.3f} dB, SRCNN {sr.psnr:.3f} dB, "
                    f"SSIM {sr.ssim:.4f}")
        model = best_model(meta)
    save_model(model, args.out)
    log(f"wrote {args.out}: val {best[0]:.3f} dB at iter {best[1]}"
        + (f" (split 2 {meta['validation2_psnr']:.3f} dB)" if val2_pairs else "")
        + f", {meta['train_seconds']:.0f}s training")
    print(json.dumps({"out": str(args.out), "validation_psnr": meta["validation_psnr"],
                      **({"validation2_psnr": meta["validation2_psnr"]} if val2_pairs else {}),
                      "selected_iteration": best[1], "set5_psnr": meta.get("set5_psnr")}), flush=True)

if __name__ == "__main__":
    main()
