"""The GPU engine's image path: whole images, interleaved as OpenCV decodes them, through the device.

Per image (or per band of a large one): the samples are copied into the slot's pinned buffer and
uploaded once; on the device the colour kernels (srgpu.kernels.colour) split them into BT.601
Y/Cb/Cr float planes and alpha, Y goes through bicubic + SRCNN, Cb, Cr and alpha through bicubic
(the engine's own plane_device path, exactly what upscale_frame runs on the planes the CPU would
have converted), the colour kernels interleave the result back into samples, and it is downloaded
once into pinned memory. Gray images skip the colour kernels. Several images are in flight at
once on the mechanism the video frames use (srgpu.engine.overlap.SlotPipeline): while one is
computed, the next is uploaded and the last downloaded.

Images vary in size, so a slot's buffers are sized per image and kept while the next one has the
same shapes (a folder of one camera's photos, a large photo's bands). A large image goes in bands
of rows (srgpu.bands) of about ``band_output_pixels`` output pixels, so that device and pinned
memory stay bounded; the bands overlap one another on the device.

Results are copied out of pinned memory when waited for (``wait()`` returns an array the caller
owns, and the slot is free for the next image at once): the writers may hold an image for a while.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Protocol

import numpy as np

from ..bands import Band, band_rows, bands, halo_rows
from ..plans import output_bits
from .overlap import IN_FLIGHT, SlotPipeline, _Slot
from .pinned import empty_pinned

if TYPE_CHECKING:
    from .gpu import GPUEngine

GPU_BAND_OUTPUT_PIXELS = 8 * 2**20  # per band: ~0.3 GB of device buffers a slot at 16-bit RGBA
MIN_PINNED_BYTES = 4 * 2**20
RowsCallback = Callable[[int, int], None]


class ImageTicket(Protocol):
    def wait(self) -> np.ndarray:
        """The upscaled image (the caller's to keep), once it is ready."""


class ImageProcessor(Protocol):
    """Images of any size through an engine; ``order``: the channel order ``submit`` takes and
    ``wait`` gives ('rgb' or OpenCV's 'bgr'); ``in_flight``: images worth submitting before waiting
    for the oldest."""

    order: str
    in_flight: int

    def submit(self, image: np.ndarray, progress: RowsCallback | None = None) -> ImageTicket: ...

    def close(self) -> None: ...


class _Buffers:
    """One slot's buffers, by role: kept while the shapes stay, made anew when they change (only
    ever while the slot is free, so no copy or kernel still uses the old ones)."""

    def __init__(self, slot: _Slot) -> None:
        self.slot = slot
        self.pinned: dict[str, np.ndarray] = {}
        self.device: dict[str, Any] = {}

    def host(self, role: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A pinned array of ``shape``, a view of a buffer of a power-of-two size (at least
        MIN_PINNED_BYTES) replaced by a larger one when too small: pinning memory costs about a
        millisecond per call, so a folder of growing sizes makes a few, and CuPy's pinned pool,
        which hands freed blocks back for requests of the same size, serves the next folder's."""
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        buf = self.pinned.get(role)
        if buf is None or buf.nbytes < nbytes:
            self.pinned.pop(role, None)
            capacity = 1 << max(nbytes - 1, MIN_PINNED_BYTES - 1).bit_length()
            buf = self.pinned[role] = empty_pinned(capacity, dtype=np.uint8)
        return buf[:nbytes].view(dtype).reshape(shape)

    def dev(self, role: str, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        import cupy as cp

        arr = self.device.get(role)
        if arr is None or tuple(arr.shape) != tuple(shape) or arr.dtype != dtype:
            self.device.pop(role, None)
            # allocated on the slot's stream: CuPy's pool hands a block back to the stream it came
            # from, and every use of this slot's blocks is complete when the slot is free
            with self.slot.stream:
                arr = self.device[role] = cp.empty(shape, dtype=dtype)
        return arr


class _Ticket:
    """A piece (an image or a band) queued on a slot. ``wait()`` copies the result out of pinned
    memory, into ``into`` (rows of a larger image) or a fresh array, and frees the slot."""

    def __init__(self, owner: "OverlappedImages", slot: _Slot, host: np.ndarray,
                 into: tuple[np.ndarray, slice, slice] | None = None) -> None:
        self._owner, self._slot, self._host, self._into = owner, slot, host, into
        self._out: np.ndarray | None = None

    def wait(self) -> np.ndarray:
        if self._out is None:
            try:
                self._owner._wait(self._slot)
                if self._into is None:
                    self._out = np.array(self._host)
                else:
                    target, rows, kept = self._into
                    target[rows] = self._host[kept]
                    self._out = target
            finally:
                self._owner._done(self)
        return self._out


class _Finished:
    def __init__(self, image: np.ndarray) -> None:
        self._image = image

    def wait(self) -> np.ndarray:
        return self._image


class OverlappedImages(SlotPipeline):
    """Images through a GPUEngine, colour conversion on the device, ``in_flight`` of them queued at
    once. Takes and gives OpenCV's channel order (BGR, BGRA) or gray; uint8 or uint16."""

    order = "bgr"

    def __init__(self, engine: GPUEngine, slots: int | None = None,
                 band_output_pixels: int = GPU_BAND_OUTPUT_PIXELS) -> None:
        from ..kernels.colour import Colour

        slots = IN_FLIGHT + 1 if slots is None else slots
        if slots < 2:
            raise ValueError("overlap needs at least 2 slots")
        self.engine = engine
        self.in_flight = slots - 1
        self.band_output_pixels = band_output_pixels
        self._init_slots(engine, slots, False, lambda _: ([], [], []))
        for slot in self._slots:
            slot.store = _Buffers(slot)
        with engine.device, engine._guard("compiling the colour kernels"):
            self.colour = Colour(engine.device_index, engine.limits)
        self._pending: deque[_Ticket] = deque()  # queued, not waited for: oldest first
        self._closed = False

    # ------------------------------------------------------------ ImageProcessor

    def submit(self, image: np.ndarray, progress: RowsCallback | None = None) -> ImageTicket:
        """Queue ``image`` (H, W) gray or (H, W, 3|4) BGR(A), uint8/uint16; returns once it is on the
        device. A large image goes in bands and is complete (its bands waited for, ``progress``
        called after each) when this returns."""
        _check_image(image)
        h, w = image.shape[:2]
        scale = self.engine.scale
        parts = bands(h, band_rows(w, scale, self.band_output_pixels), halo_rows(self.engine.model.halo, scale))
        if len(parts) == 1:
            ticket: ImageTicket = self._submit_piece(np.ascontiguousarray(image))
            if progress is not None:
                progress(h * scale, h * scale)  # (as upscale_image: the rows are queued, not yet done)
            return ticket
        out = np.empty((h * scale, w * scale) + image.shape[2:], image.dtype)
        queued: deque[tuple[Band, _Ticket]] = deque()
        for band in parts:
            into = (out, slice(band.k0 * scale, band.k1 * scale), band.kept(scale))
            queued.append((band, self._submit_piece(np.ascontiguousarray(image[band.b0:band.b1]), into)))
            while len(queued) > self.in_flight:
                self._finish_band(queued.popleft(), h * scale, progress)
        while queued:
            self._finish_band(queued.popleft(), h * scale, progress)
        return _Finished(out)

    def close(self) -> None:
        """Wait for everything queued (the pending images are dropped: nobody asked for them)."""
        if self._closed:
            return
        self._closed = True
        self._pending.clear()
        self._close_slots()

    # ------------------------------------------------------------ pieces

    def _finish_band(self, item: tuple[Band, _Ticket], total_rows: int, progress: RowsCallback | None) -> None:
        band, ticket = item
        ticket.wait()
        if progress is not None:
            progress(band.k1 * self.engine.scale, total_rows)

    def _submit_piece(self, piece: np.ndarray, into: tuple[np.ndarray, slice, slice] | None = None) -> _Ticket:
        while not self._free and self._pending:  # every slot taken: the oldest result is copied out first
            self._pending[0].wait()
        slot = self._acquire()
        engine, store = self.engine, slot.store
        try:
            with engine.device, engine._guard("allocating image buffers"):
                d_in, d_out, compute, host_in, host_out = self._prepare(store, piece)
        except BaseException:
            self._release(slot)
            raise

        def upload(stream: Any) -> None:
            d_in.set(host_in, stream=stream)

        def download(stream: Any) -> None:
            d_out.get(stream=stream, out=host_out, blocking=False)

        # no wait for the upload: it reads the slot's own pinned copy, untouched until the slot is free
        self._queue(slot, upload, compute, download, "queueing an image", wait_upload=False)
        ticket = _Ticket(self, slot, host_out, into)
        self._pending.append(ticket)
        return ticket

    def _prepare(self, store: _Buffers, piece: np.ndarray) -> tuple[Any, Any, Callable[[], None], np.ndarray,
                                                                     np.ndarray]:
        """The slot's buffers for ``piece`` (its samples copied into pinned memory) and the compute
        that turns the device input into the device output."""
        engine, colour = self.engine, self.colour
        scale, dtype = engine.scale, piece.dtype
        top = float(np.iinfo(dtype).max)
        h, w = piece.shape[:2]
        out_hw = (h * scale, w * scale)
        out_shape = out_hw + piece.shape[2:]
        host_in = store.host("in", piece.shape, dtype)
        np.copyto(host_in, piece)
        host_out = store.host("out", out_shape, dtype)
        d_in = store.dev("in", piece.shape, dtype)
        d_out = store.dev("out", out_shape, dtype)
        if piece.ndim == 2:
            def compute() -> None:
                engine.srcnn_device(d_in, d_out, top)
        else:
            alpha = piece.shape[2] == 4
            planes = [store.dev(r, (h, w), np.dtype(np.float32)) for r in ("y", "cb", "cr")]
            ups = [store.dev(r, out_hw, np.dtype(np.float32)) for r in ("Y", "CB", "CR")]
            a_in = store.dev("a", (h, w), dtype) if alpha else None
            a_out = store.dev("A", out_hw, dtype) if alpha else None

            def compute() -> None:
                colour.to_planes(d_in, *planes, a_in, self.order, engine.stream)
                # the float luma ends up in samples of the image's depth: the precision that
                # meets the bar there may run (srgpu.plans)
                engine.srcnn_device(planes[0], ups[0], top, output_bits(dtype, top))
                engine.bicubic_device(planes[1], ups[1], top)
                engine.bicubic_device(planes[2], ups[2], top)
                if a_in is not None:
                    engine.bicubic_device(a_in, a_out, top)
                colour.from_planes(*ups, a_out, d_out, self.order, engine.stream)
        return d_in, d_out, compute, host_in, host_out

    def _done(self, ticket: _Ticket) -> None:
        """``ticket`` was waited for (or failed): it is no longer pending, its slot free."""
        try:
            self._pending.remove(ticket)
        except ValueError:
            pass
        self._release(ticket._slot)


def _check_image(image: np.ndarray) -> None:
    from ..imagefile import ImageFileError

    if image.dtype not in (np.uint8, np.uint16):
        raise ImageFileError(f"unsupported sample type {image.dtype}")
    if image.ndim != 2 and not (image.ndim == 3 and image.shape[2] in (3, 4)):
        raise ImageFileError(f"unsupported image layout {image.shape}")
