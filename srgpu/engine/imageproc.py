"""The GPU engine's image path: whole images, interleaved as OpenCV decodes them, through the device.

Per image (or per band of a large one): the samples are copied into the slot's pinned buffer and
uploaded once; on the device the colour kernels (srgpu.kernels.colour) split them into BT.601
Y/Cb/Cr float planes and alpha, Y goes through bicubic + SRCNN, Cb, Cr and alpha through bicubic
(the engine's own plane_device path, exactly what upscale_frame runs on the planes the CPU would
have converted), the colour kernels interleave the result back into samples, and it is downloaded
once into pinned memory. Gray images skip the colour kernels. Several images are in flight at
once on the mechanism the video frames use (srgpu.engine.overlap.SlotPipeline): while one is
computed, the next is uploaded and the last downloaded.

Small images go through in groups: images of one shape and sample type are gathered (up to
``GROUP_OUTPUT_PIXELS`` output pixels; a few shapes at once, for folders that alternate portrait
and landscape) and each step above runs once for the whole group, the kernels taking the images
as a batch of planes (grid z). What a small image costs is then its samples' copies, not a dozen
launches and copies of its own. A group goes to the device when it is full, when a ticket of it is
waited for, or when a new shape needs its place; a shape's groups start small and double (one
image, two, four ...), so that the first results come at once.

A slot's buffers are views of buffers grown by capacity, so a new image size allocates nothing
once the largest has been seen. A large image goes in bands of rows (srgpu.engine.bands) of about
``band_output_pixels`` output pixels, so that device and pinned memory stay bounded; the bands
overlap one another on the device.

Results are downloaded into pinned memory of their own, not the slot's (``wait()`` returns an array
the caller owns, a view of its group's block, and the slot is free for the next group at once): the
writers may hold an image for a while, and the engine's thread copies nothing out.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Protocol

import numpy as np

from .bands import Band, band_rows, bands, halo_rows
from .plans import output_bits
from .overlap import IN_FLIGHT, SlotPipeline, Slot
from .pinned import empty_pinned

if TYPE_CHECKING:
    from ..kernels.colour import Colour
    from .gpu import GPUEngine

GPU_BAND_OUTPUT_PIXELS = 8 * 2**20  # per band: ~0.3 GB of device buffers a slot at 16-bit RGBA
GROUP_OUTPUT_PIXELS = GPU_BAND_OUTPUT_PIXELS  # a group's output pixels at most: a band's buffers serve it
MAX_GROUP_IMAGES = 64
OPEN_GROUPS = 4  # shapes gathered at once; a fifth sends the oldest group to the device
KEPT_STARTS = 256  # shapes whose slow start is remembered
MIN_PINNED_BYTES = 4 * 2**20
MIN_OUTPUT_BYTES = 2**20
RowsCallback = Callable[[int, int], None]


class ImageTicket(Protocol):
    def wait(self) -> np.ndarray:
        """The upscaled image (the caller's to keep), once it is ready."""

    def ready(self) -> bool:
        """Whether ``wait()`` would return at once: results handed on as soon as they are done."""


class ImageProcessor(Protocol):
    """Images of any size through an engine; ``order``: the channel order ``submit`` takes and
    ``wait`` gives ('rgb' or OpenCV's 'bgr'); ``in_flight``: images worth submitting before waiting
    for the oldest."""

    order: str
    in_flight: int

    def submit(self, image: np.ndarray, progress: RowsCallback | None = None) -> ImageTicket: ...

    def close(self) -> None: ...


def _grown(nbytes: int, minimum: int = 1) -> int:
    """A capacity for ``nbytes``: the next power of two, at least ``minimum``."""
    return 1 << max(nbytes - 1, minimum - 1, 0).bit_length()


def _output_block(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Pinned memory for a group's results, handed to the caller as they are (no copy on the
    engine's thread: at 8 GB/s, copying out a small photo's 2 MB cost more than its whole trip
    through the device). A block of a power-of-two size from CuPy's pinned pool, which takes it
    back when the last of the group's images is dropped (written) and hands it to a later group."""
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    return empty_pinned(_grown(nbytes, MIN_OUTPUT_BYTES), dtype=np.uint8)[:nbytes].view(dtype).reshape(shape)


class _Buffers:
    """One slot's buffers, by role: views of a buffer per role that grows (to a power-of-two size)
    when an image needs more, so that new sizes allocate nothing. Only ever touched while the slot
    is free, so no copy or kernel still uses them."""

    def __init__(self, slot: Slot) -> None:
        self.slot = slot
        self.pinned: dict[str, np.ndarray] = {}
        self.device: dict[str, Any] = {}
        self._views: dict[str, tuple[tuple[int, ...], np.dtype, Any]] = {}  # the last view, by role

    def host(self, role: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A pinned array of ``shape``, a view of a buffer of at least MIN_PINNED_BYTES: pinning
        memory costs about a millisecond per call, so a folder of growing sizes makes a few, and
        CuPy's pinned pool, which hands freed blocks back for requests of the same size, serves
        the next folder's."""
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        buf = self.pinned.get(role)
        if buf is None or buf.nbytes < nbytes:
            self.pinned.pop(role, None)
            buf = self.pinned[role] = empty_pinned(_grown(nbytes, MIN_PINNED_BYTES), dtype=np.uint8)
        return buf[:nbytes].view(dtype).reshape(shape)

    def dev(self, role: str, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        dtype = np.dtype(dtype)
        last = self._views.get(role)
        if last is not None and last[0] == shape and last[1] == dtype:
            return last[2]
        import cupy as cp

        nbytes = math.prod(shape) * dtype.itemsize
        buf = self.device.get(role)
        if buf is None or buf.nbytes < nbytes:
            self.device.pop(role, None)
            # allocated on the slot's stream: CuPy's pool hands a block back to the stream it came
            # from, and every use of this slot's blocks is complete when the slot is free
            with self.slot.stream:
                buf = self.device[role] = cp.empty(_grown(nbytes), dtype=np.uint8)
        view = buf[:nbytes].view(dtype).reshape(shape)
        self._views[role] = (shape, dtype, view)
        return view


class _Group:
    """Images of one shape and sample type, run through the device together (one piece: an image,
    a band of one, or several small images)."""

    def __init__(self, key: tuple[Any, ...], capacity: int,
                 into: tuple[np.ndarray, slice, slice] | None = None) -> None:
        self.key = key
        self.capacity = capacity
        self.into = into  # a band: where its rows go in the whole image
        self.images: list[np.ndarray] = []
        self.slot: Slot | None = None
        self.host_out: np.ndarray | None = None  # its pinned output block (N, H, W[, C]) once queued
        self.result: np.ndarray | None = None  # that block, once waited for
        self.error: BaseException | None = None

    @property
    def full(self) -> bool:
        return len(self.images) >= self.capacity


class _Ticket:
    """An image (or a band) in a group. ``wait()`` sends the group to the device if it has not gone
    yet, waits for it, and returns the image: a view of the group's pinned output block (or, a
    band, the whole image its rows were copied into)."""

    def __init__(self, owner: "OverlappedImages", group: _Group, index: int) -> None:
        self._owner, self._group, self._index = owner, group, index

    def wait(self) -> np.ndarray:
        result = self._owner._result(self._group)
        if self._group.into is not None:
            return self._group.into[0]
        return result[self._index]

    def ready(self) -> bool:
        """Whether ``wait()`` would return without waiting for the device (or sending a group)."""
        group = self._group
        if group.result is not None or group.error is not None:
            return True
        return group.slot is not None and group.host_out is not None and bool(group.slot.downloaded.done)


class _Finished:
    def __init__(self, image: np.ndarray) -> None:
        self._image = image

    def wait(self) -> np.ndarray:
        return self._image

    def ready(self) -> bool:
        return True


class OverlappedImages(SlotPipeline):
    """Images through a GPUEngine, colour conversion on the device, ``in_flight`` of them queued at
    once. Takes and gives OpenCV's channel order (BGR, BGRA) or gray; uint8 or uint16."""

    order = "bgr"

    def __init__(self, engine: GPUEngine, slots: int | None = None,
                 band_output_pixels: int = GPU_BAND_OUTPUT_PIXELS,
                 group_output_pixels: int = GROUP_OUTPUT_PIXELS) -> None:
        from ..kernels.colour import Colour

        slots = IN_FLIGHT + 1 if slots is None else slots
        if slots < 2:
            raise ValueError("overlap needs at least 2 slots")
        self.engine = engine
        self.groups_in_flight = slots - 1
        self.band_output_pixels = band_output_pixels
        self.group_output_pixels = group_output_pixels
        self._init_slots(engine, slots, False, lambda _: ([], [], []))
        for slot in self._slots:
            slot.store = _Buffers(slot)
        # compiled on a thread of its own (a first run on a fresh machine: ~0.5 s) while the first
        # images are read and the engine compiles its plan; waited for where first needed
        self._colour_pool = ThreadPoolExecutor(1, thread_name_prefix="srgpu-colour-compile")
        self._colour_future = self._colour_pool.submit(Colour, engine.device_index, engine.limits)
        self._colour_pool.shutdown(wait=False)
        self._colour_ready: Colour | None = None
        self._open: OrderedDict[tuple[Any, ...], _Group] = OrderedDict()  # gathering, oldest first
        self._queued: deque[_Group] = deque()  # on the device, not yet waited for: oldest first
        self._capacity = 1  # the images a group of the last shape opened may take: what ``in_flight`` counts on
        self._starts: OrderedDict[tuple[Any, ...], int] = OrderedDict()  # per shape: its next group's size
        self._closed = False

    @property
    def colour(self) -> Colour:
        if self._colour_ready is None:
            with self.engine.device, self.engine._guard("compiling the colour kernels"):
                self._colour_ready = self._colour_future.result()
        return self._colour_ready

    @property
    def in_flight(self) -> int:  # type: ignore[override]
        """Images worth submitting before waiting for the oldest: enough to fill a group per slot."""
        return self.groups_in_flight * self._capacity

    # ------------------------------------------------------------ ImageProcessor

    def submit(self, image: np.ndarray, progress: RowsCallback | None = None) -> ImageTicket:
        """Queue ``image`` (H, W) gray or (H, W, 3|4) BGR(A), uint8/uint16: gathered with others
        of its shape, or sent to the device at once. A large image goes in bands and is complete
        (its bands waited for, ``progress`` called after each) when this returns."""
        _check_image(image)
        h, w = image.shape[:2]
        scale = self.engine.scale
        parts = bands(h, band_rows(w, scale, self.band_output_pixels), halo_rows(self.engine.model.halo, scale))
        if len(parts) == 1:
            ticket = self._gather(image)
            if progress is not None:
                progress(h * scale, h * scale)  # (as upscale_image: the rows are queued, not yet done)
            return ticket
        out = np.empty((h * scale, w * scale) + image.shape[2:], image.dtype)
        queued: deque[tuple[Band, _Ticket]] = deque()
        for band in parts:
            into = (out, slice(band.k0 * scale, band.k1 * scale), band.kept(scale))
            group = _Group(("band",), 1, into)
            group.images.append(image[band.b0:band.b1])
            self._send(group)
            queued.append((band, _Ticket(self, group, 0)))
            while len(queued) > self.groups_in_flight:
                self._finish_band(queued.popleft(), h * scale, progress)
        while queued:
            self._finish_band(queued.popleft(), h * scale, progress)
        return _Finished(out)

    def close(self) -> None:
        """Wait for everything queued (the pending images are dropped: nobody asked for them)."""
        if self._closed:
            return
        self._closed = True
        self._open.clear()
        for group in self._queued:
            self._release_group(group)
        self._queued.clear()
        self._close_slots()

    # ------------------------------------------------------------ groups

    def _gather(self, image: np.ndarray) -> _Ticket:
        key = (image.shape, image.dtype.str)
        group = self._open.get(key)
        if group is None:
            if len(self._open) >= OPEN_GROUPS:
                self._send(self._open.popitem(last=False)[1])
            h, w = image.shape[:2]
            per_image = h * w * self.engine.scale**2
            capacity = int(min(MAX_GROUP_IMAGES, max(1, self.group_output_pixels // max(1, per_image))))
            # a slow start: a shape's first group is one image, the next two, then four ...: the
            # writers get their first images at once, not after a full group of each shape
            start = self._starts.pop(key, 1)
            self._starts[key] = min(capacity, 2 * start)
            while len(self._starts) > KEPT_STARTS:
                self._starts.popitem(last=False)
            group = self._open[key] = _Group(key, min(capacity, start))
            self._capacity = capacity
        group.images.append(image)
        ticket = _Ticket(self, group, len(group.images) - 1)
        if group.full:
            del self._open[key]
            self._send(group)
        return ticket

    def _send(self, group: _Group) -> None:
        """Queue ``group`` on a free slot (waiting for the oldest group on the device, which frees
        its slot, when none is free)."""
        while not self._free and self._queued:
            self._result(self._queued[0])
        slot = self._acquire()
        group.slot = slot
        try:
            with self.engine.device, self.engine._guard("allocating image buffers"):
                d_in, d_out, compute, host_in, host_out = self._prepare(slot.store, group.images)
        except BaseException as e:
            group.error = e
            self._release_group(group)
            raise
        group.images = []  # in pinned memory now: the caller's arrays are not held

        def upload(stream: Any) -> None:
            d_in.set(host_in, stream=stream)

        def download(stream: Any) -> None:
            d_out.get(stream=stream, out=host_out, blocking=False)

        try:
            # no wait for the upload: it reads the slot's own pinned copy, untouched until the slot is free
            self._queue(slot, upload, compute, download, "queueing an image", wait_upload=False)
        except BaseException as e:
            group.error = e
            group.slot = None  # _queue released it
            raise
        group.host_out = host_out
        self._queued.append(group)

    def _result(self, group: _Group) -> np.ndarray:
        """``group``'s images, (N, H, W[, C]), in its own pinned block (the slot is then free):
        sent to the device first if it is still gathering; a failure raises for every ticket."""
        if group.result is not None:
            return group.result
        if group.error is not None:
            raise group.error
        if group.slot is None:  # still gathering
            if self._open.get(group.key) is group:
                del self._open[group.key]
            self._send(group)
        try:
            self._wait(group.slot)  # type: ignore[arg-type]
            if group.into is None:
                group.result = group.host_out  # the caller's now (_output_block)
            else:
                target, rows, kept = group.into
                target[rows] = group.host_out[0][kept]  # type: ignore[index]
                group.result = target
        except BaseException as e:
            group.error = e
            raise
        finally:
            self._release_group(group)
        return group.result

    def _release_group(self, group: _Group) -> None:
        try:
            self._queued.remove(group)
        except ValueError:
            pass
        group.host_out = None
        if group.slot is not None:
            slot, group.slot = group.slot, None
            self._release(slot)

    def _finish_band(self, item: tuple[Band, _Ticket], total_rows: int, progress: RowsCallback | None) -> None:
        band, ticket = item
        ticket.wait()
        if progress is not None:
            progress(band.k1 * self.engine.scale, total_rows)

    def _prepare(self, store: _Buffers, images: list[np.ndarray]) -> tuple[Any, Any, Callable[[], None],
                                                                            np.ndarray, np.ndarray]:
        """The slot's buffers for ``images`` (one shape and type; their samples copied into pinned
        memory) and the compute that turns the device input into the device output: every kernel
        once for the whole batch."""
        engine = self.engine
        scale, dtype = engine.scale, images[0].dtype
        top = float(np.iinfo(dtype).max)
        n, (h, w) = len(images), images[0].shape[:2]
        H, W = h * scale, w * scale
        channels = images[0].shape[2:]
        # the luma's plan first (a first run compiles it here), then the colour kernels, which were
        # compiling meanwhile
        engine.ready_for((h, w), (H, W), output_bits(dtype, top))
        host_in = store.host("in", (n, h, w) + channels, dtype)
        for i, image in enumerate(images):
            np.copyto(host_in[i], image)
        host_out = _output_block((n, H, W) + channels, dtype)
        d_in = store.dev("in", (n, h, w) + channels, dtype)
        d_out = store.dev("out", (n, H, W) + channels, dtype)
        if not channels:
            def compute() -> None:
                engine.srcnn_device(d_in, d_out, top)
        else:
            c, colour = channels[0], self.colour
            f32 = np.dtype(np.float32)
            # Y, Cb, Cr one after another: the two chroma planes are one batch for the bicubic
            planes = store.dev("ycc", (3, n, h, w), f32)
            ups = store.dev("YCC", (3, n, H, W), f32)
            a_in = store.dev("a", (n, h, w), dtype) if c == 4 else None
            a_out = store.dev("A", (n, H, W), dtype) if c == 4 else None

            def compute() -> None:
                colour.to_planes(d_in.reshape(n * h, w, c), *(p.reshape(n * h, w) for p in planes),
                                 None if a_in is None else a_in.reshape(n * h, w), self.order, engine.stream)
                # the float luma ends up in samples of the image's depth: the precision that
                # meets the bar there may run (srgpu.engine.plans)
                engine.srcnn_device(planes[0], ups[0], top, output_bits(dtype, top))
                engine.bicubic_device(planes[1:].reshape(2 * n, h, w), ups[1:].reshape(2 * n, H, W), top)
                if a_in is not None:
                    engine.bicubic_device(a_in, a_out, top)
                colour.from_planes(*(u.reshape(n * H, W) for u in ups), None if a_out is None else
                                   a_out.reshape(n * H, W), d_out.reshape(n * H, W, c), self.order, engine.stream)
        return d_in, d_out, compute, host_in, host_out


def _check_image(image: np.ndarray) -> None:
    from ..errors import ImageFileError

    if image.dtype not in (np.uint8, np.uint16):
        raise ImageFileError(f"unsupported sample type {image.dtype}")
    if image.ndim != 2 and not (image.ndim == 3 and image.shape[2] in (3, 4)):
        raise ImageFileError(f"unsupported image layout {image.shape}")
