"""Video upscaling through the bundled ffmpeg: probe, reader, processing and writer stages (see api.py)."""
