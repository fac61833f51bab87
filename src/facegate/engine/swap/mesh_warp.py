"""``mesh_warp``: the built-in geometric swapper.

The source face's texture is mapped onto the target's mesh (so the target's pose and
expression are kept by construction), with the pose fill from ``symmetry``, the target's
eyes and mouth kept where expressions differ, the target's shading kept and the source's
detail taken, and a feathered or Poisson blend under a mask trimmed below the hairline.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from facegate.engine import mesh
from facegate.engine.errors import NoFaceDetected, SourceUnusable
from facegate.engine.swap.blend import feather_blend, poisson_blend
from facegate.engine.swap.color import (
    DETAIL_GAIN,
    Detail,
    Shading,
    detail_layers,
    is_grayscale,
    match_lighting,
    target_shading,
    to_lab,
    transfer_colour,
)
from facegate.engine.swap.eyes import agreeing_eyes, fill_eyes
from facegate.engine.swap.filters import gaussian_blur
from facegate.engine.swap.geometry import FloatArray
from facegate.engine.swap.glasses import frames_box, remove_glasses, remove_glasses_in_place
from facegate.engine.swap.hair import source_fringe
from facegate.engine.swap.masks import face_mask, features_mask, keep_mask
from facegate.engine.swap.options import FaceSwapperOptions
from facegate.engine.swap.outline import Displacement, displaced, displacement_field
from facegate.engine.swap.reshape import Shape, face_shape, reshaped_points, reshaped_target
from facegate.engine.swap.symmetry import UNUSABLE, triangle_quality
from facegate.engine.swap.warp import MeshRaster, mesh_raster, warp_face
from facegate.engine.tone import cheek_area
from facegate.engine.types import Face, Frame

#: Margin around the landmarks' box, as a fraction of its size (room for the feather).
REGION_MARGIN = 0.12


@dataclass(frozen=True)
class Tuning:
    """How much of the source's identity the swap takes (benchmarks/quality.py measures it
    with an independent recogniser, beside seams, skin colour and landmark error).

    Three bands, their sigmas as fractions of the face height (forehead top → chin): the
    source gives everything finer than ``low_pass`` (skin texture, lashes, wrinkles, the
    edges of lids and lips), its contrast matched to the target's within ``detail_gain``; the
    band between ``low_pass`` and ``core_low_pass`` (the shape and shading of eyes, brows,
    nose and mouth: what a recogniser reads) is the source's in the core of the face and the
    target's towards the mask edge (``core_blur``: the core's softness, as ``mask_blur``), so
    no edge shows; the target keeps what varies slower (its broad lighting and skin tone).
    ``face_only_low_pass``: the low-passes average face pixels only (``color.low_pass``).
    ``reshape``: how far the target's mesh moves towards the source's proportions
    (``reshape.reshaped_points``; 0 = the target's shape). ``outline``: the share of that
    shift the face oval takes (jaw, cheeks and chin; 0 = the target's outline); the region
    around the face follows it (``swap.outline``).
    ``source_eyes``: the mesh's eye holes take the source's eyes where both faces are near
    frontal and the eyes open alike (``swap.eyes``); else the target's eyeballs stay.
    ``max_source_turn``: a source face turned further (yaw or pitch, degrees) is refused
    (``SourceUnusable``): past a three-quarter view the far half of the face is hidden, and
    what the mesh maps there is the near half mirrored — a broken nose and mouth (the
    profile photo of benchmarks/quality.py, 53°). Between ``reshape.NO_POSE`` and this, the
    source's texture is used where it shows.

    Why three bands (measured on shared/data/faces, ``benchmarks/quality.py``): one split at
    0.035 (``BEFORE_IDENTITY``) leaves most results recognised as the target; one at 0.15
    carries identity but shows the source's jaw and hairline contrast at the mask edge. Why
    the outline: with the target's kept, even a hard paste of the whole inner face stays at a
    median distance of 0.43 from the source (the recogniser reads the jaw and chin too). Why
    ``low_pass`` 0.045 and a ``detail_gain`` floor of 0.85 (were 0.035 and 0.7): together they
    took the median distance from 0.453 to 0.444 (tuning half 0.450 → 0.441, check half
    0.454 → 0.447) with the seam ratio and skin ΔE no worse; ``low_pass`` alone raised the
    seam ratio (0.947), the gain floor alone moved the tuning half only.

    Skin tone (issue 29): the mid band carries the source's own local light (a cheek in shade
    where the target's had a highlight): the cheeks were a median CIE76 ΔE of 7.8 from the
    target's (``engine.tone``). ``skin_mid``: the share of the source's mid band taken on the
    skin between the features (``masks.features_mask``, grown by ``feature_grow`` of the face
    width); the eyes, brows, nose and mouth keep all of it. ``tone_match``: one L*a*b* offset
    per face makes the mean of that skin the target's (``color.tone_offset``). Measured over
    the 104 pairs (tone median / worst, median d(result, source)): before 7.84 / 18.9 / 0.444;
    ``tone_match`` alone 6.39 / 16.2 / 0.442; ``skin_mid`` 0.5 4.95 / 13.6 / 0.451; 0 (taken)
    3.52 / 10.9 / 0.457: the recogniser reads some of a face in its cheeks' shading, which
    the option ``skin_shading`` ``source`` gives back (``skin_mid`` 1).

    Second pass (issue 29): the tone is matched locally instead of by one offset:
    ``tone_sigma`` (of the face height) > 0 makes the skin's tone the target's at every place
    broader than it (``color.tone_field``), so half of the source's mid band can come back on
    the skin (``skin_mid`` 0.5). Over the 104 pairs with the glasses handled as by default
    (transferred % / median d(result, source) / tone median / worst): one offset, ``skin_mid``
    0: 71.2 / 0.517 / 3.13 / 9.8; ``tone_sigma`` 0.08: 70.2 / 0.529 / 2.46 / 7.5; 0.15:
    70.2 / 0.520 / 2.87 / 8.7; ``skin_mid`` 0.5 with 0.1: 73.1 / 0.518 / 3.30 / 9.4 (taken),
    with 0.15: 74.0 / 0.507 / 3.90 / 10.7; ``skin_mid`` 1 with 0.1: 76.0 / 0.513 / 4.36 /
    11.3, with 0.15: 76.0 / 0.503 / 5.22 / 13.2. The worst pairs' cheek patches lie beside
    the nose, inside the features' mask, where the source's mid band is all taken.

    Fifth pass (issue 29): ``cheek_tone_sigma`` (of the face height) > 0 matches the tone
    at that finer scale on the cheeks (``tone.cheek_area``: discs of ``cheek_radius`` of the
    inter-ocular distance around the cheek centres ``engine.tone`` measures at, feathered),
    the broader ``tone_sigma`` elsewhere. The worst pairs' cheeks kept a highlight or a
    shade of the source's own light finer than ``tone_sigma``. Over the 104 pairs
    (transferred % and median d(result, source), target turned <= 45°; tone median / worst):
    off: 84.0 / 0.495, 3.34 / 9.70; 0.06 with radius 0.2 (taken): 84.0 / 0.497, 2.50 / 7.93
    (pairs not tuned on: 79.7 / 0.487, 2.21 / 7.93); radius 0.25: 83.0 / 0.497, 2.49 / 7.85;
    0.3: 81.9 / 0.497, 2.48 / 7.79; 0.07 with 0.25: 84.0 / 0.495, 2.76 / 8.46; 0.05 with 0.35:
    79.8 / 0.503, 2.35 / 7.18; the whole skin at 0.07 (``tone_sigma``): 79.8 / 0.508, 2.75 / 8.36.
    The recogniser reads the shading around the cheeks: the wider or finer the match, the
    less identity. Cost: +0.3 ms a 1080p swap (one more blur in the colour stage).

    ``mask_inset``: how far inside the trimmed oval the blend mask's feather is centred, in
    feather sigmas (``masks.face_mask``; 1.5 before the third pass of issue 29). The mask is
    also multiplied by the warp's coverage, so past the mesh nothing of the source shows
    whatever the inset; an inset only hands the face's rim (the cheeks' and jaw's outline
    and shading, what a recogniser reads there) back to the target. Measured over the 104
    pairs, defaults otherwise (transferred % / median d(result, source), target turned
    <= 45°): 1.5: 78.7 / 0.502; 0.5: 84.0 / 0.495; 0 (taken): 84.0 / 0.494; the option
    ``mask_blur`` 0.1 with 1.5 (a narrower feather) gave 84.0 / 0.491 but a harder edge.
    """

    low_pass: float = 0.045
    core_low_pass: float = 0.15
    core_blur: float = 0.6
    face_only_low_pass: bool = True
    reshape: float = 1.0
    outline: float = 1.0
    source_eyes: bool = True
    max_source_turn: float = 45.0
    detail_gain: tuple[float, float] = (0.85, 1.5)
    skin_mid: float = 0.5
    keep_glasses: bool = True
    remove_source_glasses: bool = True
    feature_grow: float = 0.06
    tone_match: bool = True
    tone_sigma: float = 0.1
    cheek_tone_sigma: float = 0.06
    cheek_radius: float = 0.2
    mask_inset: float = 0.0
    keep_out_fringe: bool = True

    def takes_source(self, turned: float) -> bool:
        """Whether a source face turned ``turned`` degrees (``reshape.Shape.turned``) is
        used, not refused."""
        return turned <= self.max_source_turn


#: The baseline ``benchmarks/quality.py`` measures beside the default tuning in the same run:
#: one split at 3.5 % of the face height, no reshape, the target's eyes (most results are
#: recognised as the target).
BEFORE_IDENTITY = Tuning(
    low_pass=0.035,
    core_low_pass=0.0,
    face_only_low_pass=False,
    reshape=0.0,
    outline=0.0,
    source_eyes=False,
    max_source_turn=90.0,
    detail_gain=DETAIL_GAIN,
    skin_mid=1.0,
    tone_match=False,
    keep_glasses=False,
    remove_source_glasses=False,
    mask_inset=1.5,
    keep_out_fringe=False,
)

#: A source face more than this many times larger than the target is downscaled first
#: (remap interpolates linearly and would alias).
MAX_SOURCE_RATIO = 1.5
#: A target face larger than the source face (and than this many pixels, forehead → chin)
#: is swapped at a working scale where it matches the source: the texture can hold no more
#: detail than the source has, and the target's part (its low-pass shading) is smooth, so
#: only the final blend runs at full size. Cost then stops growing with the target's size.
MIN_WORK_SIZE = 256.0


@dataclass(frozen=True)
class MeshWarpSource:
    """Prepared source identity: the face crop and everything derived from it once."""

    image: Frame
    detail: Detail  # L*a*b* high (and mid) band of ``image`` (for ``match_lighting``)
    points: FloatArray  # (478, 3) in crop pixels
    quality: FloatArray  # (852,) how well the source shows each triangle
    grayscale: bool
    shape: Shape  # its frontal-frame shape and pose trust (reshape; 0 trust: a profile)
    size: float  # forehead-top → chin distance, pixels
    # Downscaled copies for smaller targets, by quantised scale (see ``_scaled_source``):
    # a video's face keeps its size from frame to frame, so each is made once, not per frame.
    scaled: dict[int, tuple[Frame, Detail, FloatArray]] = field(
        default_factory=dict, compare=False, repr=False
    )


def face_height(points: FloatArray) -> float:
    return float(np.linalg.norm(points[mesh.FOREHEAD_TOP, :2] - points[mesh.CHIN, :2]))


def _region(points: FloatArray, shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    lo, hi = points[:, :2].min(axis=0), points[:, :2].max(axis=0)
    pad = (hi - lo) * REGION_MARGIN + 2.0
    x0, y0 = np.floor(lo - pad).astype(int)
    x1, y1 = np.ceil(hi + pad).astype(int)
    return max(0, x0), max(0, y0), min(shape[1], x1), min(shape[0], y1)


@dataclass(frozen=True)
class _TargetSide:
    """What a swap needs of the target's pixels alone, at the working scale: its shading (in
    L*a*b*, with its low-pass when the lighting is matched), and the core mask that goes with
    it (made there: the helper thread has the time)."""

    shading: Shading | FloatArray  # Shading, or the plain L*a*b* for transfer_colour
    core: FloatArray | None  # where the source's mid band is taken (match_lighting)
    reshaped: Frame | None  # the target warped onto the reshaped mesh (None: not reshaped)
    grayscale: bool  # a grey photo: the swapped face is made grey too
    # The skin away from the eyes, brows, nose and mouth (features_mask < 0.5), where the
    # face's mean tone is matched to the target's (None: not matched).
    skin_zone: npt.NDArray[np.bool_] | None = None
    # Where the tone is matched at the finer ``Tuning.cheek_tone_sigma`` (tone.cheek_area).
    cheeks: FloatArray | None = None


class MeshWarpBackend:
    """The geometric swap backend (no model files; pure OpenCV/numpy, thread-safe).

    A swap's target side (the working-scale resize, the reshaped target, its shading) does
    not depend on the warp: it is handed to a helper thread while the caller's thread
    rasterises the mesh (which the reshape waits for), warps, draws the masks and displaces
    the full-size region. When swaps run at once on one backend (a video's render threads,
    two workers' jobs, several live streams) each does all of its own work: the concurrent
    swaps keep the cores busy already, and handing work to and fro between them and the
    helper only cost CPU (720p video, two render threads: ~1.5 ms of CPU a frame, 0-8 % of
    its fps; issue 28). Likewise when the helper is busy, the caller does it itself.
    """

    def __init__(self, tuning: Tuning = Tuning()) -> None:
        self.tuning = tuning
        self._lock = threading.Lock()
        self._helper: ThreadPoolExecutor | None = None
        self._swapping = 0  # swaps in progress on this backend, any thread

    def _count(self, change: int) -> None:
        with self._lock:
            self._swapping += change

    def _helper_pool(self) -> ThreadPoolExecutor | None:
        if (os.cpu_count() or 1) < 2:
            return None
        with self._lock:
            if self._helper is None:
                helper = ThreadPoolExecutor(1, thread_name_prefix="mesh-warp")
                weakref.finalize(self, helper.shutdown, wait=False)
                self._helper = helper
            return self._helper

    def prepare_source(
        self,
        source_faces: Sequence[Face],
        source_frames: Sequence[Frame],
        options: FaceSwapperOptions,
        request: object = None,  # built in: no model files to resolve per tenant
    ) -> MeshWarpSource:
        if not source_faces:
            raise NoFaceDetected("no face in the source image")
        # One texture is mapped, so several photos of one person can't be averaged here:
        # take the largest face among those turned little enough to show the whole face.
        shapes = [face_shape(face.landmarks) for face in source_faces]
        usable = [i for i, shape in enumerate(shapes) if self.tuning.takes_source(shape.turned)]
        if not usable:
            turned, limit = min(shape.turned for shape in shapes), self.tuning.max_source_turn
            raise SourceUnusable(
                f"the source face is turned {turned:.0f}° from the camera; the built-in swapper "
                f"needs one turned at most {limit:.0f}° (it maps the source's own pixels, and "
                "half of a face turned further is hidden): use a photo that faces the camera"
            )
        best = max(usable, key=lambda i: source_faces[i].width * source_faces[i].height)
        face, frame = source_faces[best], source_frames[best]
        x0, y0, x1, y1 = _region(face.landmarks, frame.shape)
        crop = np.ascontiguousarray(frame[y0:y1, x0:x1])
        points = (face.landmarks - np.array([x0, y0, 0], np.float32)).astype(np.float32)
        hole = None
        if self.tuning.remove_source_glasses and options.glasses != "swap":
            # a source's glasses never travel onto a target
            crop, hole = remove_glasses(crop, points)
        fringe = source_fringe(crop, points) if self.tuning.keep_out_fringe else None
        if fringe is not None:  # hair over the forehead: the target's own forehead shows there
            hole = fringe if hole is None else np.maximum(hole, fringe)
        size = face_height(points)
        detail = detail_layers(
            crop,
            max(1.0, self.tuning.low_pass * size),
            self._face(points, (crop.shape[0], crop.shape[1])),
            self.tuning.core_low_pass * size,
        )
        if hole is not None:  # where the paint is, the target's own skin shows instead
            detail = replace(detail, hole=hole)
        return MeshWarpSource(
            image=crop,
            detail=detail,
            points=points,
            quality=triangle_quality(points),
            grayscale=is_grayscale(crop),
            shape=face_shape(points),
            size=size,
        )

    def _face(self, points: FloatArray, shape: tuple[int, int]) -> FloatArray | None:
        """The face below the hairline (the mask's trimmed oval, hard): the weight of a
        face-only low-pass, or None for a plain one."""
        if not self.tuning.face_only_low_pass:
            return None
        return face_mask(points, shape, (0.0, 0.0, 0.0, 0.0), 0.0)

    def swap_face(
        self,
        frame: Frame,
        source_state: object,
        target_face: Face,
        options: FaceSwapperOptions,
        timings: dict[str, float] | None = None,
    ) -> Frame:
        self._count(1)
        try:
            return self._swap(frame, source_state, target_face, options, timings)
        finally:
            self._count(-1)

    def _swap(
        self,
        frame: Frame,
        source_state: object,
        target_face: Face,
        options: FaceSwapperOptions,
        timings: dict[str, float] | None,
    ) -> Frame:
        if not isinstance(source_state, MeshWarpSource):
            raise TypeError("mesh_warp got a source state it did not prepare")
        if options.blend == 0.0:
            return frame
        x0, y0, x1, y1 = _region(target_face.landmarks, frame.shape)
        if x1 - x0 < 8 or y1 - y0 < 8:
            return frame
        clock = time.perf_counter()
        stamps: dict[str, float] = {}

        def stage(name: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            stamps[name] = stamps.get(name, 0.0) + now - clock
            clock = now

        full_points = (target_face.landmarks - np.array([x0, y0, 0], np.float32)).astype(np.float32)
        work = _working_scale((y1 - y0, x1 - x0), full_points, source_state.size)
        x1, y1 = x0 + work.full[0], y0 + work.full[1]  # trimmed to whole steps of the shrink
        size, factors = work.size, work.factors
        full_shape = (y1 - y0, x1 - x0)
        full_target = frame[y0:y1, x0:x1]
        painted = None  # where the target's glasses were painted out (option glasses remove)
        if options.glasses == "remove":  # the target's glasses painted out, then swapped over
            painted = remove_glasses_in_place(full_target, full_points)
        shape = (size[1], size[0])
        unmoved = (full_points * factors).astype(np.float32)
        points = unmoved  # where the face goes: the target's mesh, or the reshaped one
        target_shape = face_shape(full_points)
        # The source's eyes fill the mesh's eye holes where both faces are near frontal.
        eyes = self.tuning.source_eyes and min(target_shape.trust, source_state.shape.trust) > 0.5
        # With occluders kept (face_swapper puts the frame's own pixels back over the face
        # after this), the region around the face must not move: a hand reaching over the jaw
        # would be put back where it was inside the face and moved outside it.
        outline = 0.0 if options.keep_outline or options.occlusion else self.tuning.outline
        moved = full_points
        if self.tuning.reshape > 0.0:
            moved = reshaped_points(source_state.shape, target_shape, self.tuning.reshape, outline)
            points = (moved * factors).astype(np.float32)

        # A moved outline: the region around the face follows it (swap.outline). The spline
        # (~1.5 ms of CPU) is solved by the first thread that needs it: at a working scale the
        # target side (the helper's), before it displaces the working-scale region, so this
        # thread goes on to the raster at once; it displaces the full-size region later.
        solved: list[Displacement | None] = []
        solving = threading.Lock()

        def the_displacement() -> Displacement | None:
            with solving:  # one solve, whichever thread asks first; the other waits
                if not solved:
                    found = None
                    if outline > 0.0 and points is not unmoved:
                        lo, hi = full_points[:, :2].min(axis=0), full_points[:, :2].max(axis=0)
                        room = float(min(lo.min(), full_shape[1] - hi[0], full_shape[0] - hi[1]))
                        found = displacement_field(full_points, moved, full_shape, max(room, 2.0))
                    solved.append(found)
                return solved[0]

        scaled = shape != full_shape
        # The region the face is blended into; at full size it is the target side's too.
        base = full_target
        if not scaled and (displacement := the_displacement()) is not None:
            base = displaced(full_target, displacement)
        stage("outline")

        def target_side() -> _TargetSide:
            started = time.perf_counter()
            if scaled:
                target = work.shrink(full_target)
                shifts = the_displacement()
                background = target if shifts is None else displaced(target, shifts)
            else:
                target, background = full_target, base
            # Reshaped: the target's own eyes, mouth and shading follow the new mesh; outside
            # the mesh the region is the displaced one (or, with the outline kept, unmoved).
            reshaped = (
                None
                if points is unmoved
                else reshaped_target(target, unmoved, points, rastered.result(), background)
            )
            if reshaped is not None:
                target = reshaped
            # The helper's own clock (it runs beside the stages of this thread).
            shaded = time.perf_counter()
            stamps["side.reshape"] = shaded - started
            shading: Shading | FloatArray
            core = None
            zone = None
            if options.match_lighting:
                height = face_height(points)
                # The paint of a removed pair of glasses is no skin: the shading and the
                # tone come from the skin around it.
                paint = None
                if painted is not None:
                    paint = painted if not scaled else work.shrink_mask(painted)
                    if reshaped is not None:
                        paint = reshaped_target(paint, unmoved, points, rastered.result(), paint)
                # A turned face (a profile) on either side: the target keeps its own mid band
                # (the mesh is least sure there: a profile source pastes its camera onto the
                # target's mouth, and identity does not carry either way).
                core = face_mask(points, shape, options.mask_padding, self.tuning.core_blur)
                core *= np.float32(min(target_shape.trust, source_state.shape.trust))
                skin_mid = 1.0 if options.skin_shading == "source" else self.tuning.skin_mid
                if skin_mid < 1.0 or self.tuning.tone_match:
                    features = features_mask(points, shape, self.tuning.feature_grow)
                    if skin_mid < 1.0:
                        core *= features * np.float32(1.0 - skin_mid) + np.float32(skin_mid)
                    if self.tuning.tone_match:
                        zone = features < 0.5
                        if paint is not None:
                            zone &= paint < 0.1
                if paint is not None:
                    # its mid band there is still the paint's (the fine low-pass is narrower
                    # than the paint): the source's, as on the features
                    soft = gaussian_blur(paint, max(0.5, self.tuning.low_pass * height))
                    trust = min(target_shape.trust, source_state.shape.trust)
                    core = np.maximum(core, np.clip(2.0 * soft, 0.0, 1.0) * np.float32(trust))
                face = self._face(points, shape)
                if paint is not None:
                    face = (1.0 if face is None else face) * np.clip(1.0 - 2.0 * paint, 0.0, 1.0)
                shading = target_shading(
                    target,
                    max(1.0, self.tuning.low_pass * height),
                    face,
                    self.tuning.core_low_pass * height,
                )
            else:
                shading = to_lab(target)
            cheeks = None
            if zone is not None and self.tuning.cheek_tone_sigma > 0.0:
                cheeks = cheek_area(points, shape, self.tuning.cheek_radius)
            side = _TargetSide(shading, core, reshaped, is_grayscale(target), zone, cheeks)
            stamps["side.shading"] = time.perf_counter() - shaded
            return side

        # The target's glasses stay whole in front of the new face, where they were: looked
        # for on the region as it came (nothing is pasted into it before the blend).
        region = frame[y0:y1, x0:x1]  # in place: the caller owns the frame (SwapBackend)
        keep_glasses = self.tuning.keep_glasses and options.glasses == "keep"

        def glasses_check() -> tuple[tuple[int, int, int, int], FloatArray, Frame] | None:
            started = time.perf_counter()
            frames = frames_box(region, full_points)
            kept = None if frames is None else region[_rows_cols(frames[0])].copy()
            stamps["side.glasses"] = time.perf_counter() - started
            return None if frames is None or kept is None else (*frames, kept)

        # The helper only for a swap alone on this backend (see the class).
        helper = self._helper_pool() if self._swapping == 1 else None
        # The mesh's raster, shared by both warps onto it (the target side's reshape waits).
        rastered: Future[MeshRaster] = Future()
        # The helper looks for the target's glasses (needed at the blend only) while this
        # thread rasterises the mesh (a loop of ~850 short OpenCV calls, each giving up the
        # interpreter: beside the target side's numpy work it took ~1.5x as long), then takes
        # the target side (whose reshape needs the raster).
        looked = helper.submit(glasses_check) if helper is not None and keep_glasses else None
        try:
            rastered.set_result(mesh_raster(points, shape))
        except BaseException as error:  # nothing waits for the raster yet; nothing will
            rastered.set_exception(error)
            raise
        pending = helper.submit(target_side) if helper is not None else None
        raster = rastered.result()
        stage("raster")
        source_image, source_detail, source_points = _scaled_source(
            source_state, face_height(points)
        )
        # The layers mapped: the source's detail bands for match_lighting, else its pixels.
        layers = source_detail.layers() if options.match_lighting else [source_image]
        warp = warp_face(
            layers[0],
            source_points,
            source_state.quality,
            points,
            shape,
            raster,
            UNUSABLE if source_state.shape.trust <= 0.0 else 0.0,
        )
        warped = [warp.image, *(warp.maps.sample(layer) for layer in layers[1:])]
        if eyes:
            which = agreeing_eyes(source_points, points)
            fill_eyes(warped, warp.coverage, layers, source_points, points, which)
        stage("bands")

        # The masks, on this thread while the helper finishes the target side.
        keep = keep_mask(source_state.points, points, shape, options.keep_expression, eyes)
        if source_detail.hole is not None:  # where the source's glasses were: the target's skin
            keep = np.maximum(keep, warp.maps.sample(source_detail.hole))
        face_region = face_mask(
            points, shape, options.mask_padding, options.mask_blur, self.tuning.mask_inset
        )
        coverage = np.asarray(
            cv2.erode(warp.coverage.astype(np.float32), np.ones((3, 3), np.uint8)), np.float32
        )
        covered = cv2.GaussianBlur(coverage, (0, 0), 1.0)
        swapped = face_region * (1.0 - keep) * covered
        skin = ((swapped > 0.5) & warp.coverage).astype(np.float32)
        # Not reshaped: the kept eyes and mouth are the frame's own pixels (outside the mask).
        # Reshaped: they moved with the mesh, so they come from the reshaped target, inside it.
        if points is unmoved:
            mask = swapped
        else:
            mask = face_region * np.maximum(covered, keep)
        # The face shows only where the mask is non-zero (enlarged, one pixel further): the
        # colour stage runs on that window of the region, ~60 % of it.
        rows, cols = _support(mask, 1)
        full_size = (full_shape[1], full_shape[0])
        full_mask = mask
        if scaled:
            enlarged = cv2.resize(mask, full_size, interpolation=cv2.INTER_LINEAR)
            full_mask = np.asarray(enlarged, np.float32)
        stage("mask")

        # The full-size region around the face, displaced (needed at the blend only): one
        # long OpenCV call here, where this thread would otherwise wait for the target side.
        if scaled and (displacement := the_displacement()) is not None:
            base = displaced(full_target, displacement)
        stage("outline")

        # The target side (the helper's; not started yet, the helper being busy with other
        # swaps: this thread's): the colour stage includes waiting for it.
        side = target_side() if pending is None or pending.cancel() else pending.result()
        stage("side wait")
        face = np.zeros((*shape, 3), np.uint8)
        inside = face[rows, cols]
        if isinstance(side.shading, Shading):
            mid = None if len(warped) < 2 else warped[1][rows, cols]
            inside[...] = match_lighting(
                warp.image[rows, cols],
                side.shading.crop(rows, cols),
                skin[rows, cols],
                source_state.grayscale,
                self.tuning.detail_gain,
                mid,
                None if side.core is None else side.core[rows, cols],
                None
                if side.skin_zone is None
                else (side.skin_zone[rows, cols] & (skin[rows, cols] > 0.5)).view(np.uint8),
                self.tuning.tone_sigma * face_height(points),
                None if side.cheeks is None else side.cheeks[rows, cols],
                self.tuning.cheek_tone_sigma * face_height(points),
            )
        else:
            inside[...] = transfer_colour(
                warp.image[rows, cols],
                side.shading[rows, cols],
                skin[rows, cols],
                source_state.grayscale,
            )
        if side.reshaped is not None:
            inside[...] = feather_blend(inside, side.reshaped[rows, cols], keep[rows, cols], 1.0)
        if side.grayscale:  # the source's chroma detail would show as coloured smudges
            inside[...] = cv2.cvtColor(cv2.cvtColor(inside, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR)
        stage("colour")

        # The glasses check (the helper's, or this thread's where the helper had not started
        # it): the stage is the wait for it, or the check itself.
        glasses = None
        if keep_glasses:
            glasses = glasses_check() if looked is None or looked.cancel() else looked.result()
        stage("glasses")

        if scaled:
            face = np.asarray(cv2.resize(face, full_size, interpolation=cv2.INTER_LINEAR), np.uint8)
        if options.mask == "poisson":
            region[...] = poisson_blend(base, face, full_mask, options.blend)
        else:
            if base is not full_target:  # the displaced region around the face
                region[...] = base
            rows, cols = _support(full_mask, 0)  # elsewhere the blend is the region itself
            if rows.start < rows.stop:  # (nothing to blend where the mask is empty)
                region[rows, cols] = feather_blend(
                    base[rows, cols], face[rows, cols], full_mask[rows, cols], options.blend
                )
        if glasses is not None:
            frames_at, frames, kept = glasses
            box = _rows_cols(frames_at)
            region[box] = feather_blend(region[box], kept, frames, 1.0)
        stage("blend")
        if timings is not None:
            for name, seconds in stamps.items():
                timings[name] = timings.get(name, 0.0) + seconds
        return frame


def _rows_cols(box: tuple[int, int, int, int]) -> tuple[slice, slice]:
    """The rows and columns of a box (x0, y0, x1, y1)."""
    return slice(box[1], box[3]), slice(box[0], box[2])


def _support(mask: FloatArray, margin: int) -> tuple[slice, slice]:
    """The rows and columns of the box around the non-zero pixels of ``mask``, ``margin``
    pixels larger on each side (within the mask)."""
    x, y, w, h = cv2.boundingRect((mask > 0).view(np.uint8))
    rows = slice(max(0, y - margin), min(mask.shape[0], y + h + margin))
    cols = slice(max(0, x - margin), min(mask.shape[1], x + w + margin))
    return rows, cols


#: A working scale within this of a whole step (1/2, 1/3, ...) is that step: OpenCV's area
#: resize by a whole factor is ~15x faster than by any other (0.2 ms vs 3.2 ms for a 600x700
#: region), and the face is then at most 3 % smaller than the source (well under what shows).
SNAP_STEP = 0.03


@dataclass(frozen=True)
class _WorkScale:
    """The working scale of a target region (see MIN_WORK_SIZE): the region's (width, height)
    trimmed to whole ``step``s (``full``), its size at the working scale (``size``) and the
    factors (x, y, z) that take its landmarks there."""

    full: tuple[int, int]
    size: tuple[int, int]
    factors: FloatArray
    step: int

    def shrink_mask(self, mask: FloatArray) -> FloatArray:
        """A float mask over ``full`` at the working scale."""
        return np.asarray(cv2.resize(mask, self.size, interpolation=cv2.INTER_AREA), np.float32)

    def shrink(self, region: Frame) -> Frame:
        """``region`` (``full``) at the working scale: an area resize by the whole ``step``
        (OpenCV's fast path), then by what is left of the scale, if anything."""
        image = region
        if self.step > 1:
            w, h = self.full
            stepped = (w // self.step, h // self.step)
            image = np.asarray(cv2.resize(image, stepped, interpolation=cv2.INTER_AREA), np.uint8)
        if (image.shape[1], image.shape[0]) != self.size:
            image = np.asarray(cv2.resize(image, self.size, interpolation=cv2.INTER_AREA), np.uint8)
        return image


def _working_scale(shape: tuple[int, int], points: FloatArray, source_size: float) -> _WorkScale:
    """The working scale of a target region of ``shape`` (height, width) with ``points``."""
    h, w = shape
    scale = max(source_size, MIN_WORK_SIZE) / max(face_height(points), 1.0)
    if scale >= 0.9:  # resampling for a 10 % saving would cost more than it saves
        return _WorkScale((w, h), (w, h), np.ones(3, np.float32), 1)
    inverse = 1.0 / scale
    step = int(np.ceil(inverse))
    snapped = step - inverse <= SNAP_STEP * step
    if not snapped:
        step = int(inverse)
    if step > 1 and min(w, h) >= 8 * step:
        w, h = w - w % step, h - h % step
    else:
        step, snapped = 1, False
    if snapped:
        size = (w // step, h // step)
        return _WorkScale((w, h), size, np.array([1 / step] * 3, np.float32), step)
    size = (max(8, round(w * scale)), max(8, round(h * scale)))
    factors = np.array([size[0] / w, size[1] / h, scale], np.float32)
    return _WorkScale((w, h), size, factors, step)


#: Downscales of the source are made in steps of 1/SCALE_STEPS (rounded down: a little more
#: downscaling never aliases) and kept on the source state, at most MAX_SCALED of them.
SCALE_STEPS = 64
MAX_SCALED = 16


def _scaled_source(state: MeshWarpSource, target_size: float) -> tuple[Frame, Detail, FloatArray]:
    ratio = state.size / max(target_size, 1.0)
    if ratio <= MAX_SOURCE_RATIO:
        return state.image, state.detail, state.points
    step = max(1, int(MAX_SOURCE_RATIO / ratio * SCALE_STEPS))
    found = state.scaled.get(step)
    if found is None:
        found = _downscale(state, step / SCALE_STEPS)
        if len(state.scaled) >= MAX_SCALED:
            state.scaled.clear()
        state.scaled[step] = found  # threads may race to make the same copy: harmless
    return found


def _downscale(state: MeshWarpSource, scale: float) -> tuple[Frame, Detail, FloatArray]:
    h, w = state.image.shape[:2]
    size = (max(1, round(w * scale)), max(1, round(h * scale)))

    def shrink(image: npt.NDArray[Any]) -> npt.NDArray[Any]:
        return np.asarray(cv2.resize(image, size, interpolation=cv2.INTER_AREA), image.dtype)

    image = shrink(state.image)
    mid = state.detail.mid
    hole = state.detail.hole
    detail = Detail(
        shrink(state.detail.fine),
        None if mid is None else shrink(mid),
        None if hole is None else shrink(hole),
    )
    factors = np.array([size[0] / w, size[1] / h, scale], np.float32)
    return image, detail, (state.points * factors).astype(np.float32)
