"""The authors' evaluation protocol (demo_SR.m) on a folder of HR images: Y-PSNR and SSIM for
bicubic and SRCNN. See ../shared/data/README.md, "The evaluation protocol"."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from ..color import quantize, rgb_to_y_uint8
from .degrade import Degradation
from ..images.files import IMAGE_EXTENSIONS, read_image
from ..errors import ImageFileError
from .metrics import psnr, shave, ssim
from ..model import SRCNNModel
from ..reference import srcnn_forward
from ..resize import imresize


@dataclass(frozen=True)
class Scores:
    psnr: float
    ssim: float


@dataclass(frozen=True)
class ImageResult:
    name: str
    bicubic: Scores
    srcnn: Scores


def modcrop(image: np.ndarray, scale: int) -> np.ndarray:
    h, w = image.shape[:2]
    return image[: h - h % scale, : w - w % scale]


def luma_uint8(image: np.ndarray) -> np.ndarray:
    """The protocol's Y: MATLAB rgb2ycbcr on uint8 RGB; grayscale as it is."""
    if image.ndim == 2:
        return image
    return rgb_to_y_uint8(image[..., :3])


def degrade(hr_y: np.ndarray, scale: int, dtype: type = np.float64) -> tuple[np.ndarray, np.ndarray]:
    """HR Y uint8 (already modcropped) -> (LR, bicubic-upscaled) float in [0, 1], as the protocol."""
    hr = hr_y.astype(dtype) / 255.0
    lr = imresize(hr, 1.0 / scale)
    return lr, imresize(lr, float(scale))


def degrade_compressed(hr_y: np.ndarray, scale: int, degradation: Degradation) -> tuple[np.ndarray, np.ndarray]:
    """As :func:`degrade`, with the LR image made as a real input is: quantised to 8 bits (as a
    decoded image or frame is), then compressed and decompressed; -> (LR, bicubic) float64."""
    lr = imresize(hr_y.astype(np.float64) / 255.0, 1.0 / scale)
    lr = degradation.apply(quantize(lr, np.uint8)).astype(np.float64) / 255.0
    return lr, imresize(lr, float(scale))


def evaluate_y(hr_y: np.ndarray, model: SRCNNModel, scale: int,
               sr_fn: Callable[[np.ndarray], np.ndarray] | None = None,
               degradation: Degradation | None = None) -> tuple[Scores, Scores]:
    """Scores (bicubic, srcnn) for one HR Y plane. ``sr_fn`` maps the bicubic float plane to the
    SRCNN float plane; default: the float64 CPU reference. ``degradation``: compress the LR image
    first (bicubic and SRCNN both start from it); None: the authors' protocol unchanged."""
    gt = modcrop(hr_y, scale)
    _, bic = degrade(gt, scale) if degradation is None else degrade_compressed(gt, scale, degradation)
    sr = sr_fn(bic) if sr_fn else srcnn_forward(bic, model, dtype=np.float64)
    gt_s = shave(gt, scale)
    bic_q = shave(quantize(bic, np.uint8), scale)
    sr_q = shave(quantize(sr, np.uint8), scale)
    return Scores(psnr(gt_s, bic_q), ssim(gt_s, bic_q)), Scores(psnr(gt_s, sr_q), ssim(gt_s, sr_q))


SSIM_WINDOW = 11  # metrics.ssim's Gaussian window: the shaved image must hold one whole window


def smallest_side(scale: int) -> int:
    """The smallest height/width the protocol can score at ``scale``: after the crop to a
    multiple of ``scale`` and the shave of ``scale`` pixels per border, one SSIM window."""
    return -(-(SSIM_WINDOW + 2 * scale) // scale) * scale


def image_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)


def evaluate_folder(folder: Path, model: SRCNNModel, scale: int,
                    sr_fn: Callable[[np.ndarray], np.ndarray] | None = None,
                    degradation: Degradation | None = None) -> Iterator[ImageResult]:
    model.check_scale(scale)
    if degradation is not None:
        degradation.check_single()
    for path in image_files(folder):
        image = read_image(path)
        if image.dtype != np.uint8:
            raise ImageFileError(f"{path}: the protocol is defined on 8-bit images, got {image.dtype}")
        h, w = image.shape[:2]
        if min(h, w) < smallest_side(scale):
            raise ImageFileError(f"{path}: {w}x{h} is too small to evaluate at x{scale} "
                                 f"(each side needs at least {smallest_side(scale)} pixels)")
        bic, sr = evaluate_y(luma_uint8(image), model, scale, sr_fn, degradation)
        yield ImageResult(path.name, bic, sr)


def mean_scores(results: list[ImageResult]) -> tuple[Scores, Scores]:
    def m(get: Callable[[ImageResult], Scores]) -> Scores:
        return Scores(float(np.mean([get(r).psnr for r in results])), float(np.mean([get(r).ssim for r in results])))

    return m(lambda r: r.bicubic), m(lambda r: r.srcnn)
