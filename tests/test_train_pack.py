"""scripts/training/pack_train_data.py --crops and crop_pack.py (issue 42; NumPy only, no PyTorch):
lossless planes, the margin a crop keeps from its cut edges, the splits kept apart, the budget, and the
refusals (evaluation images, excluded planes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from srgpu.images.files import read_image, write_image_atomic
from srgpu.resize import imresize
from srgpu.tools.evaluate import luma_uint8, modcrop

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "training"))

import crop_pack  # noqa: E402
import pack_train_data  # noqa: E402

PACKER = ROOT / "scripts" / "training" / "pack_train_data.py"


def test_planes_round_trip_losslessly() -> None:
    rng = np.random.default_rng(0)
    for shape in ((1, 1), (7, 300), (300, 7), (192, 192), (257, 513)):
        plane = rng.integers(0, 256, shape, dtype=np.uint8)
        np.testing.assert_array_equal(crop_pack.decode_plane(crop_pack.encode_plane(plane), shape), plane)


def test_a_smooth_plane_packs_small(shared_data: Path) -> None:
    plane = luma_uint8(read_image(shared_data / "eval" / "Set5" / "baby_GT.bmp"))
    blob = crop_pack.encode_plane(plane)
    np.testing.assert_array_equal(crop_pack.decode_plane(blob, plane.shape), plane)
    assert 8 * len(blob) / plane.size < 4.5  # bits a pixel; np.savez_compressed's deflate needs about 6


def _pair(plane: np.ndarray, scale: int, hr_scale: float) -> np.ndarray:
    """train.py's bicubic input for a plane, without rounding the HR-scale resize to 8 bits: the
    rounding makes ties go either way with the sampling phase, anywhere in the plane, not only at cuts."""
    hr = plane / 255.0
    if hr_scale != 1.0:
        hr = np.clip(imresize(hr, hr_scale), 0.0, 1.0)
    hr = modcrop(hr, scale)
    return imresize(imresize(hr, 1.0 / scale), float(scale))


@pytest.mark.parametrize("scale", [2, 3, 4])
def test_beyond_the_cut_margin_a_crop_gives_the_whole_images_input(shared_data: Path, scale: int) -> None:
    """The training input made from a crop equals the whole image's (same pixels) farther than
    cut_margin from a cut edge; the crops are placed where the HR-scale resize samples both alike
    (offset x HR scale a multiple of the scale)."""
    full = luma_uint8(read_image(shared_data / "eval" / "Set5" / "baby_GT.bmp"))
    m = crop_pack.cut_margin(scale)
    for hr_scale, unit in ((1.0, 1), (0.75, 4), (0.5, 2)):
        step = unit * scale
        r0, c0 = 5 * step, 7 * step
        crop = full[r0 : r0 + 150, c0 : c0 + 170]
        a = _pair(crop, scale, hr_scale)
        kr, kc = round(r0 * hr_scale), round(c0 * hr_scale)
        b = _pair(full, scale, hr_scale)[kr : kr + a.shape[0], kc : kc + a.shape[1]]
        assert a.shape == b.shape
        np.testing.assert_allclose(a[m:-m, m:-m], b[m:-m, m:-m], rtol=0, atol=1e-9)
        assert np.abs(a - b).max() > 1e-3  # the cuts do change the input next to them


def test_min_crop_side() -> None:
    side = crop_pack.min_crop_side(crop_pack.patch_input_side("9-5-5", 48), [2, 3, 4], [0.5])
    assert side == 191  # the packer's default crop, 192, is the even side above
    for s in (2, 3, 4):
        assert crop_pack.resized_side(side, s, 0.5) >= 64 + 2 * crop_pack.cut_margin(s)
    assert crop_pack.resized_side(side - 1, 4, 0.5) < 64 + 2 * crop_pack.cut_margin(4)


def _image(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """A textured 8-bit grey image (smooth gradients plus noise: it compresses like a photograph)."""
    y, x = np.mgrid[0:h, 0:w]
    base = 120 + 60 * np.sin(x / (7 + rng.integers(0, 9))) * np.cos(y / (5 + rng.integers(0, 9)))
    return np.clip(base + rng.normal(0, 12, (h, w)), 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def image_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """root/train/{A,B}/*.png and root/extra/C/*.png, T91-like: one image twice, some under the crop size."""
    root = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(3)
    sizes = {"train/A": [(300, 420), (90, 120), (250, 250)], "train/B": [(400, 200), (210, 330), (100, 300)],
             "extra/C": [(520, 380), (260, 260), (200, 390), (330, 300), (150, 150), (240, 410)]}
    for folder, shapes in sizes.items():
        (root / folder).mkdir(parents=True)
        for i, (h, w) in enumerate(shapes):
            write_image_atomic(root / folder / f"im{i}.png", _image(rng, h, w))
    (root / "extra" / "C" / "im0.png").write_bytes((root / "train" / "A" / "im0.png").read_bytes())  # a duplicate
    (root / "unlike.txt").write_text("# the test's split 2\n[one]\nC/im1.png\nC/im2.png\nC/im3.png\n[two]\nB/im1.png\n")
    (root / "eval").mkdir()
    write_image_atomic(root / "eval" / "set.png", _image(rng, 64, 64))
    return root


def pack(root: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(PACKER), "--crops", str(root / "train"), str(root / "extra"), "-o", str(out),
           "--crop", "96", "--val-every-nth", "4", "--val2-list", str(root / "unlike.txt"), "--val-max-side", "128",
           "--eval", str(root / "eval"), "--workers", "1", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_crop_pack_splits_crops_and_budget(image_tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "p.npz"
    done = pack(image_tree, out, "--max-mb", "0.2", "--seed", "5")
    assert done.returncode == 0, done.stderr
    assert "1 identical to an earlier one" in done.stdout
    p = crop_pack.read_pack(out)
    train, val, val2 = (p.splits[k] for k in crop_pack.SPLITS)
    # split 2: every second image of each section of the list; split 1: every 4th of the rest, sorted
    assert val2.names == ["B/im1.png", "C/im1.png", "C/im3.png"]
    rest = sorted({"A/im0.png", "A/im1.png", "A/im2.png", "B/im0.png", "B/im2.png", "C/im2.png", "C/im4.png",
                   "C/im5.png"})  # C/im0.png is A/im0.png again: packed once, under its first name
    assert val.names == rest[::4]
    assert set(train.names) == set(rest) - set(val.names)  # every training image gives a crop at this budget
    assert not set(train.names) & (set(val.names) | set(val2.names))
    # the planes are the images' pixels where the boxes say
    for split in (train, val, val2):
        for plane, name, (r, c, h, w), source in zip(split.planes, split.names, split.boxes, split.sources):
            folder = {"A": "train/A", "B": "train/B", "C": "extra/C"}[name[0]]
            image = read_image(image_tree / folder / name[2:])
            assert image.shape[:2] == source and plane.shape == (h, w)
            np.testing.assert_array_equal(plane, image[r : r + h, c : c + w])
    assert all(max(s) <= 128 for s in (v.shape for v in val.planes + val2.planes))
    # crops: at most 96 a side, an image's crops never overlap, the round-robin order
    assert all(h <= 96 and w <= 96 for _, _, h, w in train.boxes)
    per_image: dict[str, list] = {}
    for name, box in zip(train.names, train.boxes):
        per_image.setdefault(name, []).append(box)
    for boxes in per_image.values():
        cover = np.zeros((600, 600), np.int32)
        for r, c, h, w in boxes:
            cover[r : r + h, c : c + w] += 1
        assert cover.max() == 1
    edges = dict(zip(train.names, train.edges()))
    assert edges["A/im1.png"][:2] == (True, True)  # 90 x 120: its rows whole, so its own top and bottom
    assert out.stat().st_size <= 0.2e6
    assert p.meta["seed"] == 5 and p.meta["duplicates_dropped"] == ["C/im0.png (identical to A/im0.png)"]
    # a bigger budget: more crops (second rounds), the first ones the same; another seed: other crops
    bigger = tmp_path / "q.npz"
    assert pack(image_tree, bigger, "--max-mb", "0.5", "--seed", "5").returncode == 0
    q = crop_pack.read_pack(bigger).splits["train"]
    assert len(q) > len(train) and q.boxes[: len(train)] == train.boxes and q.names[: len(train)] == train.names
    other = tmp_path / "r.npz"
    assert pack(image_tree, other, "--max-mb", "0.2", "--seed", "6").returncode == 0
    assert crop_pack.read_pack(other).splits["train"].boxes != train.boxes


def test_the_packer_refuses_an_evaluation_image(image_tree: Path, tmp_path: Path) -> None:
    ev = tmp_path / "eval"
    ev.mkdir()
    # a training image, transposed, as an evaluation image
    write_image_atomic(ev / "x.png", np.ascontiguousarray(read_image(image_tree / "train" / "B" / "im2.png").T))
    done = pack(image_tree, tmp_path / "p.npz", "--eval", str(ev))
    assert done.returncode == 1 and "B/im2.png: refused, it is the evaluation image" in done.stderr


def test_excluded_planes_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    plane = np.arange(200, dtype=np.uint8).reshape(10, 20)
    monkeypatch.setitem(pack_train_data.EXCLUDED, pack_train_data.plane_digest(plane), "a test's excluded plane")
    with pytest.raises(SystemExit, match="x/y.png: refused, it is a test's excluded plane"):
        pack_train_data.check_planes([("x/z.png", plane[::-1]), ("x/y.png", plane.copy())], {})


def test_the_training_data_has_no_302003(shared_data: Path) -> None:
    """Set5's woman was cut from BSD200's 302003.png: it is gone from the folder, and the packer knows its plane."""
    bsd = shared_data / "train" / "BSD200"
    if not bsd.is_dir():
        pytest.skip(f"{bsd} is not here")
    names = {p.name for p in bsd.iterdir()}
    assert len(names) == 199 and "302003.png" not in names
    assert any("302003" in reason for reason in pack_train_data.EXCLUDED.values())
