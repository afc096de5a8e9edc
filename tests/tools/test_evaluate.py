"""The authors' evaluation protocol: it must reproduce the published Set5 numbers with the
authors' weights (9-1-5 and 9-5-5, x2/x3/x4, within 0.03 dB)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import PUBLISHED_SET5

from srgpu.tools.evaluate import degrade, evaluate_folder, evaluate_y, mean_scores, modcrop
from srgpu.images.files import ImageFileError
from srgpu.model import load_mat, random_model


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["9-1-5", "9-5-5"])
@pytest.mark.parametrize("scale", [2, 3, 4])
def test_set5_reproduces_published_numbers(shared_data, reference_mat, arch, scale):
    model = load_mat(reference_mat(arch, scale))
    results = list(evaluate_folder(shared_data / "eval" / "Set5", model, scale))
    assert [r.name for r in results] == ["baby_GT.bmp", "bird_GT.bmp", "butterfly_GT.bmp", "head_GT.bmp",
                                         "woman_GT.bmp"]
    bicubic, srcnn = mean_scores(results)
    assert bicubic.psnr == pytest.approx(PUBLISHED_SET5["bicubic"][scale], abs=0.03)
    assert srcnn.psnr == pytest.approx(PUBLISHED_SET5[arch][scale], abs=0.03)
    assert 0.8 < bicubic.ssim < srcnn.ssim < 1.0


def test_modcrop_and_degrade_shapes(make_image):
    hr = make_image((23, 31), np.uint8)
    gt = modcrop(hr, 3)
    assert gt.shape == (21, 30)
    lr, bic = degrade(gt, 3)
    assert lr.shape == (7, 10) and bic.shape == (21, 30)
    assert bic.dtype == np.float64


def test_evaluate_y_scores_a_perfect_model_higher(make_image):
    # a model whose output equals its input scores exactly the bicubic numbers: conv1 passes the
    # centre tap through channel 0, conv2/conv3 pass channel 0 on (inputs are >= 0, ReLU is identity)
    m = random_model("9-1-5", 0, 2)
    w1 = np.zeros_like(m.conv1_weight); w1[0, 0, 4, 4] = 1
    w2 = np.zeros_like(m.conv2_weight); w2[0, 0, 0, 0] = 1
    w3 = np.zeros_like(m.conv3_weight); w3[0, 0, 2, 2] = 1
    identity = type(m)(w1, np.zeros(64, np.float32), w2, np.zeros(32, np.float32), w3, np.zeros(1, np.float32),
                       scale=2)
    bic, sr = evaluate_y(make_image((40, 36), np.uint8), identity, 2)
    assert sr == bic


def test_sixteen_bit_image_is_refused(tmp_path, make_image):
    import cv2

    cv2.imwrite(str(tmp_path / "deep.png"), make_image((16, 16), np.uint16))
    with pytest.raises(ImageFileError, match="8-bit"):
        list(evaluate_folder(tmp_path, random_model("9-1-5", 0, 2), 2))


@pytest.mark.parametrize("scale", [2, 3, 4])
def test_too_small_image_is_refused_but_the_smallest_allowed_scores(tmp_path, make_image, scale):
    import cv2

    from srgpu.tools.evaluate import smallest_side

    side = smallest_side(scale)
    model = random_model("9-1-5", 0, scale)
    cv2.imwrite(str(tmp_path / "ok.png"), make_image((side, side), np.uint8))
    (result,) = evaluate_folder(tmp_path, model, scale)
    assert np.isfinite([result.bicubic.psnr, result.bicubic.ssim, result.srcnn.psnr, result.srcnn.ssim]).all()
    cv2.imwrite(str(tmp_path / "small.png"), make_image((side - 1, 40), np.uint8))
    with pytest.raises(ImageFileError, match="too small"):
        list(evaluate_folder(tmp_path, model, scale))
