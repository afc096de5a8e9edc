"""Reading and writing image files: RGB(A)/gray, 8 or 16 bits, written atomically."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np

from . import outputs

IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"})


class ImageFileError(ValueError):
    """An image that cannot be read or written; the message names the file."""


def read_image(path: str | Path) -> np.ndarray:
    """-> uint8 or uint16 array: (H, W) gray, (H, W, 3) RGB or (H, W, 4) RGBA."""
    path = Path(path)
    if not path.is_file():
        raise ImageFileError(f"{path}: no such file")
    try:
        data = np.fromfile(str(path), dtype=np.uint8)
    except OSError as e:  # permissions, I/O errors
        raise ImageFileError(f"{path}: cannot read ({e.strerror or e})") from None
    image = cv2.imdecode(data, cv2.IMREAD_UNCHANGED) if data.size else None
    if image is None:
        raise ImageFileError(f"{path}: not a readable image (corrupt or unsupported format)")
    if image.dtype not in (np.uint8, np.uint16):
        raise ImageFileError(f"{path}: unsupported sample type {image.dtype} (8- and 16-bit images only)")
    if image.ndim == 3 and image.shape[2] == 1:
        image = image[..., 0]
    if image.ndim == 3:
        code = cv2.COLOR_BGRA2RGBA if image.shape[2] == 4 else cv2.COLOR_BGR2RGB
        image = cv2.cvtColor(image, code)
    return image


def encode_image(image: np.ndarray, extension: str, jpeg_quality: int = 95) -> bytes:
    ext = extension.lower()
    if image.ndim == 3:
        code = cv2.COLOR_RGBA2BGRA if image.shape[2] == 4 else cv2.COLOR_RGB2BGR
        image = cv2.cvtColor(image, code)
    params: list[int] = []
    if ext in (".jpg", ".jpeg"):
        params = [cv2.IMWRITE_JPEG_QUALITY, jpeg_quality]
    elif ext == ".webp":
        params = [cv2.IMWRITE_WEBP_QUALITY, 101]  # >100 selects lossless
    ok, buf = cv2.imencode(ext, image, params)
    if not ok:
        raise ImageFileError(f"cannot encode a {image.dtype} image with {image.shape} as {ext}")
    return buf.tobytes()


def write_image_atomic(path: str | Path, image: np.ndarray, replace: bool = True) -> int:
    """Encode, write under srgpu's temporary name in the target directory, then publish it
    (srgpu.outputs): an interrupted run never leaves a truncated file under the final name, and
    without ``replace`` a file that appeared at ``path`` meanwhile is never replaced
    (OutputExistsError). Returns the size of the file written, in bytes."""
    path = Path(path)
    if not path.parent.is_dir():
        raise ImageFileError(f"{path.parent}: output directory does not exist")
    data = encode_image(image, path.suffix)
    tmp, fd = outputs.create_temp(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    outputs.publish(tmp, path, replace)
    return len(data)
