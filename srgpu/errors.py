"""The errors raised below the layers that report them: EngineError, which every engine layer raises
(kernels, engines, the tuner), and ImageFileError, which the engines' image path raises as the image
files do. A leaf module, so the kernels can raise them without importing the engines above them."""


class EngineError(RuntimeError):
    """An engine cannot be created or cannot run; the message names the cause (kernel, device)."""


class ImageFileError(ValueError):
    """An image that cannot be read or written; the message names the file."""
