"""The ``srgpu`` command (Typer): parse arguments (commands), draw progress (progress), print (output)."""

from .commands import app, main

__all__ = ["app", "main"]
