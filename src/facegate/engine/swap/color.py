"""Lighting and colour: keep the target's shading, take the source's detail.

Frequency separation in CIE L*a*b*: the low-pass of the target (its shading, skin colour,
make-up at large scale) plus the high-pass of the source (its skin texture, brows, lashes,
wrinkles). The source's high-pass is taken in the source image before warping
(``detail_layer``), so triangles textured from their mirror image carry no lighting step
from the other side of the face.
"""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine.swap.filters import gaussian_blur
from facegate.engine.swap.geometry import FloatArray
from facegate.engine.types import Frame

#: Chroma detail is noisier than lightness detail (JPEG chroma subsampling, mixed light):
#: taking all of it gives the chroma blotches seen in the prototype.
CHROMA_DETAIL = 0.5
#: Bounds of the gain that matches the source's lightness-detail contrast to the target's
#: (fixes waxy skin from a soft source on a sharp target, and the opposite).
DETAIL_GAIN = (0.7, 1.5)


def is_grayscale(image: Frame, tolerance: int = 3) -> bool:
    """True when the three channels are equal (a grey image stored as BGR)."""
    pixels = image.reshape(-1, 3).astype(np.int16)
    spread = pixels.max(axis=1) - pixels.min(axis=1)
    return bool(np.percentile(spread, 99) <= tolerance)


def to_lab(image: Frame) -> FloatArray:
    return np.asarray(cv2.cvtColor(image.astype(np.float32) / 255.0, cv2.COLOR_BGR2Lab), np.float32)


def from_lab(lab: FloatArray) -> Frame:
    bgr = np.asarray(cv2.cvtColor(lab.astype(np.float32), cv2.COLOR_Lab2BGR), np.float32)
    return np.asarray(np.clip(np.round(bgr * 255.0), 0, 255), dtype=np.uint8)


def detail_layer(image: Frame, sigma: float) -> FloatArray:
    """High-pass of ``image`` in L*a*b* (image minus its Gaussian low-pass)."""
    lab = to_lab(image)
    return np.asarray(lab - gaussian_blur(lab, sigma), dtype=np.float32)


def _masked_std(values: FloatArray, mask: npt.NDArray[np.bool_]) -> float:
    picked = values[mask]
    return float(picked.std()) if picked.size > 16 else 0.0


def match_lighting(
    detail: FloatArray,
    target: Frame,
    skin: FloatArray,
    sigma: float,
    grayscale_source: bool,
) -> Frame:
    """Target low frequencies + the warped source ``detail`` layer (both in L*a*b*).

    ``skin`` marks the pixels whose statistics set the detail gain (face without eyes and
    mouth). A grayscale source contributes no chroma detail.
    """
    dst = to_lab(target)
    base = np.asarray(gaussian_blur(dst, sigma), dtype=np.float32)
    inside = skin > 0.5
    s_std = _masked_std(detail[..., 0], inside)
    t_std = _masked_std(dst[..., 0] - base[..., 0], inside)
    gain = float(np.clip(t_std / s_std, *DETAIL_GAIN)) if s_std > 1e-3 else 1.0
    out = base.copy()
    out[..., 0] += gain * detail[..., 0]
    if not grayscale_source:
        out[..., 1:] += CHROMA_DETAIL * detail[..., 1:]
    out[..., 0] = np.clip(out[..., 0], 0.0, 100.0)
    return from_lab(out)


def transfer_colour(
    warped: Frame, target: Frame, skin: FloatArray, grayscale_source: bool
) -> Frame:
    """Plain mean/std transfer of L*a*b* statistics over the skin (``match_lighting`` off).

    A grayscale source has no chroma statistics to scale: it takes the target's chroma.
    """
    src = to_lab(warped)
    dst = to_lab(target)
    inside = skin > 0.5
    if inside.sum() < 16:
        return warped
    out = src.copy()
    for c in range(3):
        s_mean, t_mean = float(src[..., c][inside].mean()), float(dst[..., c][inside].mean())
        s_std, t_std = _masked_std(src[..., c], inside), _masked_std(dst[..., c], inside)
        scale = float(np.clip(t_std / s_std, 0.5, 2.0)) if s_std > 1e-3 else 1.0
        out[..., c] = (src[..., c] - s_mean) * scale + t_mean
    if grayscale_source:
        out[..., 1:] = dst[..., 1:]
    out[..., 0] = np.clip(out[..., 0], 0.0, 100.0)
    return from_lab(out)
