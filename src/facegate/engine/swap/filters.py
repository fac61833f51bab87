"""Wide Gaussian and morphological filters at a reduced resolution.

A Gaussian of sigma s costs ~6·s taps per pixel and an erosion of radius r ~r² per pixel at
full size; for a face of 600 px that is most of the swap's time (measured: blurs and erosion
were 75 % of a 1080p close-up's swap). Both results are smooth at the scale of s (or r), so
they are computed on an image shrunk by a factor that keeps at least ``MIN_SIGMA`` pixels of
blur, then scaled back: the cost no longer grows with the face size.
"""

from __future__ import annotations

import math
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

#: Below this sigma (pixels) the full-resolution filter is already cheap and exact.
FAST_SIGMA = 4.0
#: Blur kept at the reduced resolution, in its pixels.
MIN_SIGMA = 2.0


def _factor(sigma: float) -> int:
    return max(1, int(sigma // MIN_SIGMA)) if sigma > FAST_SIGMA else 1


def _shrink(image: npt.NDArray[Any], factor: int) -> npt.NDArray[Any]:
    h, w = image.shape[:2]
    size = (max(1, math.ceil(w / factor)), max(1, math.ceil(h / factor)))
    return np.asarray(cv2.resize(image, size, interpolation=cv2.INTER_AREA), image.dtype)


def _grow(image: npt.NDArray[Any], shape: tuple[int, ...]) -> npt.NDArray[Any]:
    size = (shape[1], shape[0])
    return np.asarray(cv2.resize(image, size, interpolation=cv2.INTER_LINEAR), image.dtype)


def _residual_sigma(sigma: float, factor: int) -> float:
    # Area averaging over `factor` pixels already blurs by about factor/2 (box variance f²/12
    # plus the linear upscale's); what is left is applied at the reduced scale.
    return math.sqrt(max(sigma**2 - (factor**2) / 4.0, 0.25)) / factor


def gaussian_blur(image: npt.NDArray[Any], sigma: float) -> npt.NDArray[Any]:
    """``cv2.GaussianBlur(image, (0, 0), sigma)``, computed at reduced size for wide sigmas."""
    factor = _factor(sigma)
    if factor == 1:
        return np.asarray(cv2.GaussianBlur(image, (0, 0), sigma), image.dtype)
    small = _shrink(image, factor)
    small = np.asarray(cv2.GaussianBlur(small, (0, 0), _residual_sigma(sigma, factor)), small.dtype)
    return _grow(small, image.shape)


def normalised_blurs(
    values: npt.NDArray[np.float32], weight: npt.NDArray[np.float32], sigmas: tuple[float, ...]
) -> list[npt.NDArray[np.float32]]:
    """blur(values × weight) / blur(weight) at each of ``sigmas`` (``values`` H×W×C,
    ``weight`` H×W, > 0; the product made once for all), the division done at the reduced
    size: one enlargement instead of two."""
    # OpenCV's product with the weight repeated per channel: numpy's broadcast over a
    # trailing axis of 3 runs ~5x slower.
    weighted = np.asarray(cv2.multiply(values, cv2.merge([weight] * values.shape[2])), np.float32)
    out = []
    for sigma in sigmas:
        factor = _factor(sigma)
        if factor == 1:
            num = cv2.GaussianBlur(weighted, (0, 0), sigma)
            den = cv2.GaussianBlur(weight, (0, 0), sigma)
            out.append(np.asarray(num / den[..., None], np.float32))
            continue
        residual = _residual_sigma(sigma, factor)
        num = cv2.GaussianBlur(_shrink(weighted, factor), (0, 0), residual)
        den = cv2.GaussianBlur(_shrink(weight, factor), (0, 0), residual)
        out.append(_grow(np.asarray(num / den[..., None], np.float32), values.shape))
    return out


def erode_blur(mask: npt.NDArray[np.float32], radius: int, sigma: float) -> npt.NDArray[np.float32]:
    """Erode ``mask`` with an elliptical kernel of ``radius``, then Gaussian-blur it by
    ``sigma`` — both at a reduced size when sigma is wide (the result is soft anyway)."""
    factor = _factor(sigma)
    small = _shrink(mask, factor) if factor > 1 else mask
    r = max(1, round(radius / factor))
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))
    small = np.asarray(cv2.erode(small, kernel), np.float32)
    residual = _residual_sigma(sigma, factor) if factor > 1 else sigma
    small = np.asarray(cv2.GaussianBlur(small, (0, 0), residual), np.float32)
    return _grow(small, mask.shape) if factor > 1 else small
