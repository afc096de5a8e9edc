"""srgpu.outputs.replace_atomically: srgpu's own files (caches, manifests, chunk records) replaced whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from srgpu.outputs import replace_atomically


def test_a_file_is_replaced_whole_and_no_temporary_is_left(tmp_path: Path) -> None:
    final = tmp_path / "record.json"
    final.write_bytes(b"old")
    replace_atomically(final, lambda f: f.write(b"new, longer than the old"), durable=True)
    assert final.read_bytes() == b"new, longer than the old"
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]


def test_an_interrupted_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    """A worker ended by SIGTERM (raised as KeyboardInterrupt) while writing: the file is as it was."""
    final = tmp_path / "record.json"
    final.write_bytes(b"old")

    def interrupted(f) -> None:
        f.write(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        replace_atomically(final, interrupted)
    assert final.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]
