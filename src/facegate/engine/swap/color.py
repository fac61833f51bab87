"""Lighting and colour: keep the target's shading, take the source's detail.

Frequency separation in CIE L*a*b*: the low-pass of the target (its shading, skin colour,
make-up at large scale) plus the high-pass of the source (its skin texture, brows, lashes,
wrinkles). The source's high-pass is taken in the source image before warping
(``detail_layer``), so triangles textured from their mirror image carry no lighting step
from the other side of the face.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine.swap.filters import gaussian_blur, normalised_blurs
from facegate.engine.swap.geometry import FloatArray
from facegate.engine.types import Frame

#: Chroma detail is noisier than lightness detail (JPEG chroma subsampling, mixed light):
#: taking all of it gives the chroma blotches seen in the prototype.
CHROMA_DETAIL = 0.5
#: Share of the source's mid-band chroma taken in the core (the rest is the target's skin
#: tone: the recogniser needs the source's shapes, not its complexion).
MID_CHROMA = 0.5
#: Bounds of the gain that matches the source's lightness-detail contrast to the target's
#: (fixes waxy skin from a soft source on a sharp target, and the opposite); the swap's
#: ``Tuning.detail_gain`` (a sharp source keeps more of its detail: identity).
DETAIL_GAIN = (0.7, 1.5)


def is_grayscale(image: Frame, tolerance: int = 3) -> bool:
    """True when the three channels are equal (a grey image stored as BGR): at most 1 % of
    the pixels have channels more than ``tolerance`` apart (JPEG leaves a few)."""
    b, g, r = cv2.split(image)
    spread = cv2.subtract(cv2.max(cv2.max(b, g), r), cv2.min(cv2.min(b, g), r))
    _, over = cv2.threshold(spread, tolerance, 1, cv2.THRESH_BINARY)
    return cv2.countNonZero(over) <= 0.01 * spread.size


def build_lab_tables() -> None:
    """Have OpenCV build its L*a*b* conversion tables now: it does so on its first such
    conversion, and that costs 0.15-0.35 s on the 2-core machine (a third of ``facegate
    swap``'s budget from start to file written). A command starts this on a thread beside
    its other start-up work (reading the images, building the engine), then joins it."""
    cv2.cvtColor(np.zeros((1, 1, 3), np.float32), cv2.COLOR_BGR2Lab)


def to_lab(image: Frame) -> FloatArray:
    scaled = np.multiply(image, np.float32(1.0 / 255.0), dtype=np.float32)
    return np.asarray(cv2.cvtColor(scaled, cv2.COLOR_BGR2Lab), np.float32)


def from_lab(lab: FloatArray) -> Frame:
    bgr = cv2.cvtColor(lab.astype(np.float32, copy=False), cv2.COLOR_Lab2BGR)
    # Out-of-gamut negatives to 0 first, then ×255 rounded and saturated in one pass.
    return np.asarray(
        cv2.convertScaleAbs(cv2.max(bgr, _scalar(0.0, 0.0, 0.0)), alpha=255.0), np.uint8
    )


#: Weight of the pixels outside the face in :func:`low_pass` (a little, so the result stays
#: defined far from the face, where nothing of it is used).
OUTSIDE_WEIGHT = 0.02


def low_pass(lab: FloatArray, sigma: float, face: FloatArray | None = None) -> FloatArray:
    """Gaussian low-pass of ``lab``; with ``face`` (1 on the face, 0 elsewhere), a normalised
    one that averages face pixels only: near the jaw and the hairline a plain blur mixes in
    the background and the hair, and the band split there carries that contrast into the
    face (a halo inside the mask edge, and a skin tone pulled towards the background)."""
    return low_passes(lab, (sigma,), face)[0]


def low_passes(
    lab: FloatArray, sigmas: tuple[float, ...], face: FloatArray | None = None
) -> list[FloatArray]:
    """:func:`low_pass` at each of ``sigmas`` (the face weighting made once for all)."""
    if face is None:
        return [np.asarray(gaussian_blur(lab, sigma), dtype=np.float32) for sigma in sigmas]
    weight = np.asarray(face * np.float32(1.0 - OUTSIDE_WEIGHT) + OUTSIDE_WEIGHT, np.float32)
    return normalised_blurs(lab, weight, sigmas)


@dataclass(frozen=True)
class Detail:
    """A source's detail in L*a*b* (:func:`detail_layers`): its high band (``fine``) and,
    with a core band, its mid band (``mid``). Two three-channel layers rather than one of six
    channels: each is warped and mixed with OpenCV as it is, no channels split per frame."""

    fine: FloatArray
    mid: FloatArray | None = None
    # Where the source's glasses were painted out (1 = a frame; ``glasses.remove_glasses``):
    # the swap shows the target's own skin there, not the paint. None: no glasses.
    hole: FloatArray | None = None

    def layers(self) -> list[npt.NDArray[Any]]:
        """The bands there are: fine, then mid."""
        return [self.fine] if self.mid is None else [self.fine, self.mid]


def detail_layers(
    image: Frame,
    sigma: float,
    face: FloatArray | None = None,
    core_sigma: float = 0.0,
) -> Detail:
    """High-pass of ``image`` in L*a*b* (image minus its :func:`low_pass` at ``sigma``); with
    ``core_sigma`` > ``sigma``, also the band between the two low-passes (the mid
    frequencies: the shape of eyes, brows, nose and mouth)."""
    lab = to_lab(image)
    if core_sigma <= sigma:
        return Detail(np.asarray(lab - low_pass(lab, sigma, face), dtype=np.float32))
    fine, broad = low_passes(lab, (sigma, core_sigma), face)
    return Detail(
        np.asarray(cv2.subtract(lab, fine), np.float32),
        np.asarray(cv2.subtract(fine, broad), np.float32),
    )


def _masked_std(values: FloatArray, mask: npt.NDArray[np.bool_]) -> float:
    picked = values[mask]
    return float(picked.std()) if picked.size > 16 else 0.0


def _lightness_std(lab: FloatArray, mask: npt.NDArray[np.uint8], count: int) -> float:
    """Standard deviation of L* over the non-zero pixels of ``mask`` (0 for under 17)."""
    if count <= 16:
        return 0.0
    _, std = cv2.meanStdDev(lab, mask=mask)  # per channel, in one pass over the image
    return float(std[0, 0])


@dataclass(frozen=True)
class Shading:
    """The target region's shading and skin colour (its low-pass, ``base``) and its own high
    band (``high``: L*a*b* minus the low-pass at the fine sigma, which sets the detail gain);
    with a core band, its mid band (the band between the two low-passes, as the source's
    ``Detail.mid``)."""

    high: FloatArray
    base: FloatArray
    mid: FloatArray | None = None

    def crop(self, rows: slice, cols: slice) -> Shading:
        """The same shading over a window of the region (views)."""
        mid = None if self.mid is None else self.mid[rows, cols]
        return Shading(self.high[rows, cols], self.base[rows, cols], mid)


def target_shading(
    target: Frame,
    sigma: float,
    face: FloatArray | None = None,
    core_sigma: float = 0.0,
) -> Shading:
    lab = to_lab(target)
    if core_sigma <= sigma:
        base = low_pass(lab, sigma, face)
        return Shading(high=np.asarray(cv2.subtract(lab, base), np.float32), base=base)
    fine, base = low_passes(lab, (sigma, core_sigma), face)
    mid = np.asarray(cv2.subtract(fine, base), np.float32)
    # The high band as the lighting match always took it: L*a*b* − (base + mid).
    high = cv2.subtract(lab, cv2.add(base, mid))
    return Shading(high=np.asarray(high, np.float32), base=base, mid=mid)


def match_lighting(
    detail: FloatArray,
    shading: Shading,
    skin: FloatArray,
    grayscale_source: bool,
    gain_bounds: tuple[float, float] = DETAIL_GAIN,
    mid: FloatArray | None = None,
    core: FloatArray | None = None,
    tone_zone: npt.NDArray[np.uint8] | None = None,
    tone_sigma: float = 0.0,
    cheeks: FloatArray | None = None,
    cheek_sigma: float = 0.0,
) -> Frame:
    """Target low frequencies + the warped source ``detail`` layer (both in L*a*b*).

    ``shading`` is the target's (:func:`target_shading`, with the low-pass sigmas of the
    detail layer); ``skin`` marks the pixels whose statistics set the detail gain (face
    without eyes and mouth). A grayscale source contributes no chroma detail. With a mid
    band (the warped source's ``mid``, ``Detail.mid``, and a ``shading`` with one), the
    source's mid band is taken where ``core`` is 1 (well inside the face) and the target's
    where it is 0 (towards the mask edge). With ``tone_zone`` (non-zero on the skin away from
    the features), the face's tone there is made the target's own: with ``tone_sigma`` (pixels)
    at every place broader than that (:func:`tone_field`), else by one L*a*b* offset for the
    whole face (:func:`tone_offset`). With ``cheeks`` (1 on the cheeks, ``tone.cheek_area``)
    and a ``cheek_sigma`` under ``tone_sigma``, at every place broader than ``cheek_sigma``
    there.
    """
    base = shading.base
    if mid is not None and shading.mid is not None and core is not None:
        # base + target mid + core × (source mid − target mid), the source's chroma scaled
        # (OpenCV's per-channel scalars and a three-channel core: numpy's broadcasts over a
        # trailing axis of 3 run ~5x slower).
        chroma_mid = 0.0 if grayscale_source else MID_CHROMA
        source_mid = cv2.multiply(mid, _scalar(1.0, chroma_mid, chroma_mid))
        source_mid = cv2.subtract(source_mid, shading.mid)
        source_mid = cv2.multiply(source_mid, cv2.merge([core] * 3))
        base = np.asarray(cv2.add(cv2.add(base, shading.mid), source_mid), np.float32)
    inside = (skin > 0.5).view(np.uint8)
    count = int(cv2.countNonZero(inside))
    s_std = _lightness_std(detail, inside, count)
    t_std = _lightness_std(shading.high, inside, count)
    gain = float(np.clip(t_std / s_std, *gain_bounds)) if s_std > 1e-3 else 1.0
    # OpenCV's per-channel scalars over whole pixels, rather than numpy on strided channel
    # views (or broadcast bounds): ~10x faster on a 400x340 face.
    chroma = 0.0 if grayscale_source else CHROMA_DETAIL
    out = cv2.add(cv2.multiply(detail, _scalar(gain, chroma, chroma)), base)
    if tone_zone is not None and tone_sigma > 0.0:
        fine = cheek_sigma if cheeks is not None and 0.0 < cheek_sigma < tone_sigma else 0.0
        sigmas = (tone_sigma, fine) if fine else (tone_sigma,)
        fields = tone_field(np.asarray(out, np.float32), shading, tone_zone, sigmas)
        field = fields[0]
        if fine and cheeks is not None:
            # on the cheeks, the tone is the target's at every place broader than the
            # finer sigma: broad + cheeks x (fine - broad)
            step = cv2.multiply(cv2.subtract(fields[1], field), cv2.merge([cheeks] * 3))
            field = np.asarray(cv2.add(field, step), np.float32)
        out = cv2.subtract(out, field)
    elif tone_zone is not None:
        out = cv2.subtract(out, tone_offset(np.asarray(out, np.float32), shading, tone_zone))
    # L* stays within [0, 100]; a* and b* are left as they are.
    out = cv2.min(out, _scalar(100.0, _UNBOUNDED, _UNBOUNDED))
    out = cv2.max(out, _scalar(0.0, -_UNBOUNDED, -_UNBOUNDED))
    return from_lab(np.asarray(out, np.float32))


_UNBOUNDED = 1e9
#: Fewer skin pixels than this in the tone zone: no tone offset (nothing to measure it on).
MIN_TONE_PIXELS = 64


def tone_offset(out: FloatArray, shading: Shading, zone: npt.NDArray[np.uint8]) -> Any:
    """The mean L*a*b* of ``out`` minus the target's own (``shading``'s bands summed) over the
    non-zero pixels of ``zone``, as a per-channel OpenCV scalar: one offset for the whole
    face, so the skin's mean tone is the target's while every edge and shade the source
    brought (what a recogniser reads) stays. The mid band the source gives in the core
    carries its own local shading (a cheek in shadow where the target's had a highlight)."""
    if int(cv2.countNonZero(zone)) < MIN_TONE_PIXELS:
        return _scalar(0.0, 0.0, 0.0)
    own = [shading.base, shading.high] + ([] if shading.mid is None else [shading.mid])
    target = np.sum([cv2.mean(band, mask=zone)[:3] for band in own], axis=0)
    result = cv2.mean(out, mask=zone)[:3]
    return _scalar(*(float(r - t) for r, t in zip(result, target, strict=True)))


def tone_field(
    out: FloatArray, shading: Shading, zone: npt.NDArray[np.uint8], sigmas: tuple[float, ...]
) -> list[FloatArray]:
    """The local difference of ``out`` from the target's own L*a*b* over the skin of
    ``zone``, low-passed at each of ``sigmas`` (a normalised blur over the zone: the
    features' own colours do not count): one field a sigma; subtracted, the skin's tone is
    the target's at every place broader than that sigma, every finer edge and shade the
    source brought stays."""
    own = cv2.add(shading.base, shading.high)
    if shading.mid is not None:
        own = cv2.add(own, shading.mid)
    diff = np.asarray(cv2.subtract(out, own), np.float32)
    weight = np.asarray(zone, np.float32) * np.float32(1.0 - OUTSIDE_WEIGHT) + OUTSIDE_WEIGHT
    return normalised_blurs(diff, np.asarray(weight, np.float32), sigmas)


def _scalar(*values: float) -> Any:
    """A per-channel OpenCV scalar (its stubs type these arguments as Mats only)."""
    return (*values, 0.0)


def transfer_colour(
    warped: Frame, target_lab: FloatArray, skin: FloatArray, grayscale_source: bool
) -> Frame:
    """Plain mean/std transfer of L*a*b* statistics over the skin (``match_lighting`` off),
    onto the target region given in L*a*b* (:func:`to_lab`).

    A grayscale source has no chroma statistics to scale: it takes the target's chroma.
    """
    src = to_lab(warped)
    dst = target_lab
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
