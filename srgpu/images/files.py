"""Reading and writing image files: RGB(A)/gray, 8 or 16 bits, written atomically.

Images are read the way a viewer shows them: an EXIF orientation is applied to the pixels (and no
orientation tag is written, so the output looks the same). The ICC colour profile is read with
the image and written into outputs whose format can hold it; where one cannot, the write says so
in a note instead of dropping it silently.
"""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Literal, Optional

import cv2
import numpy as np

from . import jpegstrips, pngchunks, pngstrips
from .. import outputs
from ..errors import ImageFileError
from .meta import (add_tiff_icc, bmp_core_header, declared_size, exif_orientation, frame_count, icc_colour_space,
                   icc_well_formed, is_tiff, tiff_icc, upright)

IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"})
# where OpenCV writes an ICC profile; TIFF: srgpu adds it (srgpu.images.meta)
_ICC_BY_OPENCV = frozenset({".png", ".jpg", ".jpeg", ".webp"})
_TIFF = frozenset({".tif", ".tiff"})
_JPEG = frozenset({".jpg", ".jpeg"})
_STORED_AS_RGB = frozenset({".webp"})  # WebP has no gray: OpenCV writes a gray image as RGB
PNG_LEVELS = range(0, 10)  # zlib levels for --png-compression; None: OpenCV's own fast default
ChannelOrder = Literal["rgb", "bgr"]  # of colour pixels in memory; "bgr" is OpenCV's (no swap at either end)


@dataclass(frozen=True)
class ImageData:
    """A decoded image, upright, and what of its file's metadata srgpu carries over."""

    pixels: np.ndarray  # uint8/uint16: (H, W) gray, (H, W, 3) RGB or (H, W, 4) RGBA (or BGR(A), see order)
    icc: bytes | None = None  # the ICC colour profile, as stored in the file
    orientation: int = 1  # the EXIF orientation the file gave (already applied to pixels)
    order: ChannelOrder = "rgb"  # the colour channels' order in ``pixels``
    gray_alpha: bool = False  # a gray+alpha file, which OpenCV decodes as RGBA with R = G = B
    png_colour: tuple[pngchunks.Chunk, ...] = ()  # a PNG file's gAMA, cHRM, sRGB and cICP chunks


@dataclass(frozen=True)
class Written:
    """A file written by write_image_atomic: its size, and what of the image it could not hold."""

    size: int
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Encoded:
    """An encoded file, as the pieces to write one after another (a large file encoded in strips
    is never joined into one more copy), and what of the image it could not hold."""

    pieces: tuple[bytes | memoryview, ...]
    notes: tuple[str, ...] = ()

    @property
    def data(self) -> bytes | memoryview:
        return self.pieces[0] if len(self.pieces) == 1 else b"".join(self.pieces)

    @property
    def size(self) -> int:
        return sum(memoryview(p).nbytes for p in self.pieces)


def read_image(path: str | Path) -> np.ndarray:
    """-> uint8 or uint16 array, upright: (H, W) gray, (H, W, 3) RGB or (H, W, 4) RGBA."""
    return read_image_data(path).pixels


def read_image_data(path: str | Path, order: ChannelOrder = "rgb", max_pixels: int | None = None) -> ImageData:
    """The image of ``path`` upright (EXIF orientation applied; libtiff applies a TIFF's own) and its
    ICC profile. ``order="bgr"`` keeps OpenCV's channel order (no swap: the GPU's colour kernels
    read either order). A file whose header declares more than ``max_pixels`` pixels (None: no
    limit but OpenCV's), or that holds several frames or pages (only the first would be read), is
    refused before decoding, in one line that says so."""
    path = Path(path)
    try:  # no look before: a folder of small images pays for every system call
        data = np.fromfile(str(path), dtype=np.uint8)
    except (FileNotFoundError, IsADirectoryError):
        raise ImageFileError(f"{path}: no such file") from None
    except OSError as e:  # permissions, I/O errors
        raise ImageFileError(f"{path}: cannot read ({e.strerror or e})") from None
    _check_declared(path, memoryview(data), max_pixels)
    try:
        image, exif, icc = _decode(data) if data.size else (None, None, None)
    except cv2.error as e:  # OpenCV's own refusals (its pixel limit, a codec's error): one line
        raise ImageFileError(f"{path}: not a readable image ({_opencv_reason(e)})") from None
    if image is None:
        raise ImageFileError(f"{path}: not a readable image (corrupt or unsupported format)")
    if image.dtype not in (np.uint8, np.uint16):
        raise ImageFileError(f"{path}: unsupported sample type {image.dtype} (8- and 16-bit images only)")
    if image.ndim == 3 and image.shape[2] == 1:
        image = image[..., 0]
    if image.ndim == 3 and order == "rgb":
        code = cv2.COLOR_BGRA2RGBA if image.shape[2] == 4 else cv2.COLOR_BGR2RGB
        image = cv2.cvtColor(image, code)
    orientation = exif_orientation(exif) if exif else 1
    colour_type = _png_colour_type(data)
    gray_alpha = image.ndim == 3 and image.shape[2] == 4 and colour_type in (0, PNG_GRAY_ALPHA)
    png_colour = pngchunks.colour_chunks(data[:1 << 20].tobytes()) if colour_type is not None else ()
    return ImageData(upright(image, orientation), icc, orientation, order, gray_alpha, png_colour)


PNG_GRAY_ALPHA = 4  # the IHDR colour type


def _png_colour_type(data: np.ndarray) -> int | None:
    return int(data[25]) if data.size > 25 and data[:8].tobytes() == b"\x89PNG\r\n\x1a\n" else None


def opencv_max_pixels() -> int:
    """The most pixels OpenCV decodes (its OPENCV_IO_MAX_IMAGE_PIXELS, read when it loads)."""
    try:
        return int(os.environ.get("OPENCV_IO_MAX_IMAGE_PIXELS", 1 << 30))
    except ValueError:
        return 1 << 30


def _megapixels(pixels: int) -> str:
    return f"{pixels / 1e6:.0f}" if pixels >= 1e6 else f"{pixels / 1e6:.2g}"  # 2500; 0.001


def _check_declared(path: Path, data: memoryview, max_pixels: int | None) -> None:
    """Refuse, before any decoding, a file too large to decode and one whose frames or pages all
    but the first would be lost (srgpu.images.meta reads both from the file's headers)."""
    size = declared_size(data)
    if size is not None:
        w, h = size
        if max_pixels is not None and w * h > max_pixels:
            raise ImageFileError(f"{path}: declares {w}x{h} pixels ({_megapixels(w * h)} megapixels), more than "
                                 f"the limit of {max_pixels / 1e6:g} megapixels (--max-megapixels raises it)")
        if w * h > opencv_max_pixels():
            raise ImageFileError(f"{path}: declares {w}x{h} pixels ({_megapixels(w * h)} megapixels), more than "
                                 f"OpenCV decodes ({opencv_max_pixels() / 1e6:g} megapixels; its "
                                 "OPENCV_IO_MAX_IMAGE_PIXELS setting raises that)")
    frames = frame_count(data)
    if frames > 1:
        what, unit = _MULTI.get(bytes(data[:4]), ("an animated image", "frames"))
        raise ImageFileError(f"{path}: {what} of {frames} {unit}: srgpu upscales one still image per file and "
                             f"would keep only the first, so it is not upscaled (split it into still images first)")


# what a file of several frames is, by its first bytes
_MULTI = {b"RIFF": ("an animated WebP", "frames"), b"\x89PNG": ("an animated PNG (APNG)", "frames"),
          **{magic: ("a multi-page TIFF", "pages") for magic in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")}}


def _opencv_reason(error: cv2.error) -> str:
    """OpenCV's message in a few words: its last line's text, without the source location."""
    text = (getattr(error, "err", "") or str(error)).strip().splitlines()
    return (text[-1] if text else "decoder error").strip()


def _decode(data: np.ndarray) -> tuple[np.ndarray | None, bytes | None, bytes | None]:
    """(image as OpenCV decodes it unchanged, EXIF block, ICC profile). IMREAD_UNCHANGED keeps alpha
    and 16 bits but ignores the EXIF orientation, which read_image_data applies."""
    # OpenCV reads an OS/2 bitmap's colours only when asked for colour (unchanged, it returns one
    # channel of them); such a file has no alpha and 8 bits at most, so nothing else is lost
    flags = cv2.IMREAD_COLOR if bmp_core_header(data[:18].tobytes()) else cv2.IMREAD_UNCHANGED
    image, kinds, blobs = cv2.imdecodeWithMetadata(data, flags=flags)
    if image is None or image.size == 0:
        return None, None, None
    found = {int(k): np.asarray(b).tobytes() for k, b in zip(kinds, blobs)}
    icc = found.get(cv2.IMAGE_METADATA_ICCP)
    if icc is None and is_tiff(data[:4].tobytes()):  # OpenCV reads no TIFF profile
        icc = tiff_icc(data.tobytes())
    return _gray_key_to_alpha(image, data), found.get(cv2.IMAGE_METADATA_EXIF), icc


def _gray_key_to_alpha(image: np.ndarray, data: np.ndarray) -> np.ndarray:
    """A gray PNG whose tRNS chunk names one gray level transparent, as gray+alpha (RGBA with R = G
    = B, as OpenCV decodes a gray+alpha file): OpenCV drops that transparency for gray images (it
    keeps it for RGB and palette ones, as RGBA)."""
    if image.ndim != 2 or _png_colour_type(data) != 0:
        return image
    key = pngchunks.gray_transparent_level(data[:1 << 20].tobytes())  # (the chunks come before the image)
    if key is None:
        return image
    depth = int(data[24])
    if depth < 8:  # decoded with its levels spread over 0-255
        key = key * 255 // ((1 << depth) - 1)
    alpha = np.where(image == key, 0, np.iinfo(image.dtype).max).astype(image.dtype)
    return cv2.merge([image, image, image, alpha])


def encode_image_data(image: np.ndarray, extension: str, icc: bytes | None = None,
                      jpeg_quality: int = 95) -> Encoded:
    """The file's bytes, with ``icc`` embedded where the format can hold it (else a note says it
    was not kept, and why)."""
    ext = extension.lower()
    with _as_bgr(image) as bgr:
        return _encode_bgr(bgr, ext, icc, jpeg_quality)


# Rows swapped per cvtColor call. OpenCV clones its source when it is also the destination, so
# one call on a whole 24000x16000 output would hold another 1.15 GB at the peak.
SWAP_CHUNK_BYTES = 16 * 2**20


@contextlib.contextmanager
def _as_bgr(image: np.ndarray, order: ChannelOrder = "rgb", restore: bool = True) -> Iterator[np.ndarray]:
    """OpenCV's channel order for the encoder. In place where the array allows (a chunk of rows at
    a time), and swapped back afterwards unless ``restore`` is False (the caller is done with the
    image): a copy of a 24000x16000 output would be another 1.15 GB at the peak."""
    if image.ndim != 3 or image.shape[2] == 2 or order == "bgr":  # (gray+alpha has no colour order)
        yield image
        return
    code = cv2.COLOR_RGBA2BGRA if image.shape[2] == 4 else cv2.COLOR_RGB2BGR
    if not (image.flags.writeable and image.flags.c_contiguous):
        yield cv2.cvtColor(image, code)
        return
    _swap_in_place(image, code)
    try:
        yield image
    finally:
        if restore:
            _swap_in_place(image, code)  # the swap is its own inverse


def encode_params(ext: str, jpeg_quality: int = 95, png_compression: int | None = None) -> list[int]:
    """OpenCV's encoder parameters for ``ext``. PNG: OpenCV's default when ``png_compression`` is
    None (zlib level 1, run-length strategy, one filter: about twice as fast as level 1 with
    libpng's adaptive filters for files 5-10 % larger, BENCHMARKS.md), else that zlib level (0-9)."""
    if ext in (".jpg", ".jpeg"):
        return [cv2.IMWRITE_JPEG_QUALITY, jpeg_quality]
    if ext == ".webp":
        return [cv2.IMWRITE_WEBP_QUALITY, 101]  # >100 selects lossless
    if ext == ".png" and png_compression is not None:
        if png_compression not in PNG_LEVELS:
            raise ValueError(f"PNG compression level {png_compression} is not one of 0-9")
        return [cv2.IMWRITE_PNG_COMPRESSION, png_compression]
    return []


def _swap_in_place(image: np.ndarray, code: int) -> None:
    rows = max(1, SWAP_CHUNK_BYTES // max(1, image[:1].nbytes))
    for r0 in range(0, image.shape[0], rows):
        part = image[r0:r0 + rows]
        cv2.cvtColor(part, code, dst=part)


def _encode_bgr(image: np.ndarray, ext: str, icc: bytes | None, jpeg_quality: int,
                png_compression: int | None = None) -> Encoded:
    """Encode ``image`` (OpenCV's channel order) as ``ext``, into memory: srgpu writes the bytes
    itself (write_image_atomic), so that a write that fails, even at close, is seen and named."""
    problem = _icc_problem(icc, ext, image) if icc else None
    in_strips = _strip_encoder(image, ext, jpeg_quality, png_compression)
    if in_strips is not None:
        return _encode_in_strips(in_strips, ext, icc, problem)
    params = encode_params(ext, jpeg_quality, png_compression)
    if icc and problem is None:
        data = _encode_with_icc(image, ext, params, icc)
        if data is not None:
            return Encoded((data,))
        problem = f"the {ext.lstrip('.').upper()} encoder refused it"
    notes = (f"its ICC colour profile is not kept: {problem}",) if problem else ()
    try:
        ok, buf = cv2.imencode(ext, image, params)
        if ok:
            return Encoded((buf.data,), notes)  # the encoder's buffer itself, not a copy of it
    except cv2.error:
        pass
    raise ImageFileError(f"cannot encode a {image.dtype} image with {image.shape} as {ext}")


StripEncoder = Callable[[Optional[bytes]], Optional[list]]  # ICC profile or None -> the file's pieces, or None


def _strip_encoder(image: np.ndarray, ext: str, jpeg_quality: int, png_compression: int | None) -> StripEncoder | None:
    """How ``image`` (OpenCV's order) is encoded on every core, where its format and settings allow
    and its size pays (srgpu.images.jpegstrips, srgpu.images.pngstrips: the files OpenCV's settings make); None:
    one OpenCV call."""
    if ext in _JPEG and image.dtype == np.uint8 and jpegstrips.splits(image):
        return lambda icc: jpegstrips.encode_jpeg(image, jpeg_quality, icc)
    if ext == ".png" and image.ndim == 3 and image.shape[2] == 2:  # OpenCV cannot write gray+alpha
        return lambda icc: pngstrips.encode_png(image, icc, bgr=True, level=png_compression)
    if ext == ".png" and png_compression is None and pngstrips.splits(image):
        return lambda icc: pngstrips.encode_png(image, icc, bgr=True)
    return None


def _encode_in_strips(encode: StripEncoder, ext: str, icc: bytes | None, problem: str | None) -> Encoded:
    """A large file encoded on every core, as _encode_bgr: the ICC profile kept where it can be,
    said where not."""
    pieces = encode(icc if icc and problem is None else None)
    if pieces is None and icc and problem is None:
        problem = f"the {ext.lstrip('.').upper()} encoder refused it"
        pieces = encode(None)
    if pieces is None:
        raise ImageFileError(f"cannot encode this image as {ext}")
    notes = (f"its ICC colour profile is not kept: {problem}",) if problem else ()
    return Encoded(tuple(pieces), notes)


def _icc_problem(icc: bytes, ext: str, image: np.ndarray) -> str | None:
    """Why ``icc`` cannot go into this output, or None."""
    if ext not in _ICC_BY_OPENCV and ext not in _TIFF:
        return f"{ext} files cannot hold one"
    if not icc_well_formed(icc):  # checked here: libpng would print its own error before refusing it
        return "it is malformed"
    gray = (image.ndim == 2 or image.shape[2] == 2) and ext not in _STORED_AS_RGB
    space = icc_colour_space(icc)
    if space != ("GRAY" if gray else "RGB"):  # a CMYK JPEG's profile, a gray profile on an RGB file...
        return f"it describes {space or 'unknown'} colours and the output is {'gray' if gray else 'RGB'}"
    return None


def _encode_with_icc(image: np.ndarray, ext: str, params: list[int], icc: bytes) -> bytes | memoryview | None:
    """The encoded file with its ICC profile, or None where the encoder will not take the profile."""
    if ext in _TIFF:  # OpenCV writes no TIFF profile: srgpu adds the tag to its bytes
        ok, buf = cv2.imencode(ext, image, params)
        return add_tiff_icc(buf.tobytes(), icc) if ok else None
    profile = [np.frombuffer(icc, np.uint8)]
    try:
        ok, buf = cv2.imencodeWithMetadata(ext, image, [cv2.IMAGE_METADATA_ICCP], profile, params)
    except cv2.error:
        return None
    return buf.data if ok and buf is not None else None


def write_image_atomic(path: str | Path, image: np.ndarray, replace: bool = True, icc: bytes | None = None,
                       order: ChannelOrder = "rgb", png_compression: int | None = None,
                       scratch: bool = False, gray_alpha: bool = False,
                       png_colour: tuple[pngchunks.Chunk, ...] = ()) -> Written:
    """Encode (with the ICC profile ``icc`` where the format holds it), write under srgpu's
    temporary name in the target directory, check that the file on disk is the whole encoded file,
    then publish it (srgpu.outputs): a full disk or an interrupted run never leaves a truncated file
    under the final name (ImageFileError names the file and the reason), and without ``replace``
    a file that appeared at ``path`` meanwhile is never replaced (OutputExistsError). ``order``:
    the channel order of ``image``; ``scratch``: the caller is done with ``image``, whose memory the
    encoder may leave in its own channel order (no swap back of a large output). ``gray_alpha``:
    ``image`` is RGBA made from a gray+alpha file (ImageData.gray_alpha), written as gray+alpha
    where the format holds it (PNG), its gray the green samples (the others equal to within one
    level, from rounding the colour conversion). ``png_colour``: a PNG source's colour chunks
    (ImageData.png_colour), written into a PNG output, else a note says they are not kept."""
    path = Path(path)
    if gray_alpha and path.suffix.lower() == ".png" and image.ndim == 3 and image.shape[2] == 4:
        image = np.ascontiguousarray(image[..., 1::2])  # G and A: the same places in RGBA and BGRA
    with _as_bgr(image, order, restore=not scratch) as bgr:
        encoded = _encode_bgr(bgr, path.suffix.lower(), icc, 95, png_compression=png_compression)
    if png_colour:
        encoded = _with_png_colour(encoded, path.suffix.lower(), png_colour)
    try:
        tmp, fd = outputs.create_temp(path)
    except (FileNotFoundError, NotADirectoryError):
        raise ImageFileError(f"{path.parent}: output directory does not exist") from None
    except OSError as e:
        raise ImageFileError(f"{path}: cannot write it: {_reason(e)}") from None
    try:
        write_whole(fd, tmp, encoded.pieces)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise ImageFileError(f"{path}: cannot write it: {_reason(e)}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    outputs.publish(tmp, path, replace)
    return Written(encoded.size, encoded.notes)


def _with_png_colour(encoded: Encoded, ext: str, chunks: tuple[pngchunks.Chunk, ...]) -> Encoded:
    """``encoded`` with a PNG source's colour chunks, or a note where they cannot go."""
    names = ", ".join(k.decode() for k, _ in chunks)
    if ext != ".png":
        return Encoded(encoded.pieces, encoded.notes + (f"its PNG colour chunks ({names}) are not kept: "
                                                        f"{ext} files cannot hold them",))
    pieces = pngchunks.insert_after_header(encoded.pieces[0], chunks)
    if pieces is None:
        return Encoded(encoded.pieces, encoded.notes + (f"its PNG colour chunks ({names}) are not kept",))
    return Encoded(pieces + encoded.pieces[1:], encoded.notes)


VERIFY_BYTES = 64  # of the file's start and end read back: its header and trailer (PNG's IEND, ...)


def write_whole(fd: int, path: Path, pieces: tuple[bytes | memoryview, ...]) -> int:
    """Write ``pieces`` to the open file ``fd`` (of ``path``) and close it, flushed to disk, or
    raise OSError: every short write and every error is seen, at write, fsync or close (a full disk
    or quota often fails only there, which an encoder writing the file itself does not report).
    The file's size and its first and last bytes are then read back and compared with what was
    written, so that a filesystem that lost some of it is caught too. -> bytes written."""
    total = 0
    try:
        for piece in pieces:
            view = memoryview(piece).cast("B")
            while view:
                n = os.write(fd, view)
                if n <= 0:
                    raise OSError(errno.EIO, os.strerror(errno.EIO))
                total += n
                view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)  # raises the error of a write the kernel deferred to close (NFS, quotas)
    head, tail = _ends(pieces, VERIFY_BYTES)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        got_head = f.read(len(head))
        f.seek(max(0, size - len(tail)))
        got_tail = f.read(len(tail))
    if size != total or got_head != head or got_tail != tail:
        raise OSError(errno.EIO, f"the file on disk is not what was written ({size} of {total} bytes)")
    return total


def _ends(pieces: tuple[bytes | memoryview, ...], n: int) -> tuple[bytes, bytes]:
    """The first and last ``n`` bytes (at most) of the pieces joined, without joining them."""
    head = bytearray()
    for piece in pieces:
        head += bytes(memoryview(piece).cast("B")[:n - len(head)])
        if len(head) >= n:
            break
    tail = bytearray()
    for piece in reversed(pieces):
        view = memoryview(piece).cast("B")
        tail[:0] = bytes(view[max(0, len(view) - (n - len(tail))):])
        if len(tail) >= n:
            break
    return bytes(head), bytes(tail)


def _reason(error: OSError) -> str:
    """An OSError's reason in the words users know: 'no space left on device', 'disk quota exceeded'."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return os.strerror(error.errno).lower()
    reason = error.strerror or str(error)
    return reason[:1].lower() + reason[1:]
