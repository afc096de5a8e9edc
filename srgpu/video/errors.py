"""The one error type of srgpu.video."""


class VideoError(Exception):
    """A video that cannot be upscaled as asked; the message is one line and names the cause
    (with the tail of ffmpeg's own message where ffmpeg failed)."""
