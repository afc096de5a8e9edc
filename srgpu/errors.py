"""The error every engine layer raises (kernels, engines, the tuner): a leaf module, so the
kernels can raise it without importing the engines above them."""


class EngineError(RuntimeError):
    """An engine cannot be created or cannot run; the message names the cause (kernel, device)."""
