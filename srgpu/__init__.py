"""srgpu: SRCNN super-resolution for video and images on the GPU, with an exact CPU reference."""

__version__ = "0.1.0"
