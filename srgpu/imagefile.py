"""Reading and writing image files: RGB(A)/gray, 8 or 16 bits, written atomically."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import cv2
import numpy as np

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


def write_image_atomic(path: str | Path, image: np.ndarray) -> None:
    """Encode, write under a temporary name in the target directory, then rename into place:
    an interrupted run never leaves a truncated file under the final name."""
    path = Path(path)
    if not path.parent.is_dir():
        raise ImageFileError(f"{path.parent}: output directory does not exist")
    data = encode_image(image, path.suffix)
    # not mkstemp: its 0600 mode would stick to the final file; O_EXCL + 0666 honours the umask
    tmp = str(path.parent / f".{path.stem}.{secrets.token_hex(4)}.part{path.suffix}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
