"""Where the built-in swap's tone error and identity loss come from (issue 29): two splits of
``benchmarks/quality.py``'s figures over the same photos.

    .venv/bin/python benchmarks/quality_parts.py [--faces DIR] [--no-regions]

**Tone, geometry vs render.** The tone figure (``engine.tone``) compares the result's cheek
patches, placed from the mesh the swap aimed at (reshaped towards the source), with the
target's own, placed from its own mesh. The same swap rendered from the target's own bands
only (its fine and mid band in place of the source's: the target's pixels warped onto the
aimed mesh) splits that figure in two: "geometry" (that render against the target: what the
reshape alone moves under the patches) and "render" (the result against that render: what
the source's bands and the tone correction leave).

**Identity by region.** For the pairs whose target is turned at most 45° and whose source
is taken: the recogniser's distance to the source of the default result, of the source's
warped pixels colour-matched as a whole (``match_lighting`` off: the most of the source a
paste gives), and of the default result with one region of that paste put in (eyes with
brows, nose, mouth, the skin between them, the face's rim): the region whose paste lowers
the distance most is where the render gives identity away.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from benchkit import FACES
from facegate.engine import mesh
from facegate.engine.errors import SourceUnusable
from facegate.engine.faces import FaceAnalyser
from facegate.engine.identity import SAME_PERSON_DISTANCE, FaceRecogniser, identity_distance
from facegate.engine.report import face_pose
from facegate.engine.swap import mesh_warp
from facegate.engine.swap.color import Shading, match_lighting
from facegate.engine.swap.masks import face_mask
from facegate.engine.swap.mesh_warp import MeshWarpBackend
from facegate.engine.swap.options import FaceSwapperOptions
from facegate.engine.swap.reshape import reshaped_points
from facegate.engine.tone import cheek_lab
from facegate.engine.types import Face, FloatArray, Frame
from quality import MAX_TARGET_TURN, load_photos, person

Photos = dict[str, tuple[Frame, Face]]


def own_bands_lighting(detail: FloatArray, shading: Shading, *args: Any, **kwargs: Any) -> Frame:
    """``match_lighting`` with the target's own fine band for the source's (gain 1) and no
    source mid band (``core`` 0): the target's pixels on the aimed mesh."""
    args_list = list(args)
    args_list[2] = (1.0, 1.0)  # gain bounds
    if len(args_list) > 4 and args_list[4] is not None:
        args_list[4] = np.zeros_like(args_list[4])  # core: the target's mid band everywhere
    return match_lighting(shading.high, shading, *args_list, **kwargs)


def tone_split(photos: Photos) -> None:
    backend, options = MeshWarpBackend(), FaceSwapperOptions()
    rows = []
    for source, (s_frame, s_face) in photos.items():
        try:
            state = backend.prepare_source([s_face], [s_frame], options)
        except SourceUnusable:
            continue
        for target, (frame, face) in photos.items():
            if target == source:
                continue
            tuning = backend.tuning
            aimed = reshaped_points(
                s_face.landmarks, face.landmarks, tuning.reshape, tuning.outline
            )
            out = backend.swap_face(frame.copy(), state, face, options)
            # the swap's own match_lighting swapped for the call (mesh_warp's name for it)
            names = vars(mesh_warp)
            names["match_lighting"] = own_bands_lighting
            try:
                own = backend.swap_face(frame.copy(), state, face, options)
            finally:
                names["match_lighting"] = match_lighting
            found = [cheek_lab(out, aimed), cheek_lab(frame, face.landmarks), cheek_lab(own, aimed)]
            if any(lab is None for lab in found):
                continue
            result, target_own, moved = (np.asarray(lab) for lab in found)
            rows.append(
                (
                    source,
                    target,
                    float(np.linalg.norm(result - target_own)),
                    float(np.linalg.norm(moved - target_own)),
                    float(np.linalg.norm(result - moved)),
                )
            )
    figures = np.array([r[2:] for r in rows])
    print(f"\ntone split over {len(rows)} pairs (sources taken), CIE76 ΔE median / worst:")
    for i, label in enumerate(
        [
            "the figure (result vs target)",
            "geometry (target's bands on the aimed mesh vs target)",
            "render (result vs target's bands on the aimed mesh)",
        ]
    ):
        print(f"  {label:56} {np.median(figures[:, i]):5.2f} / {figures[:, i].max():5.2f}")
    print("  worst pairs: figure = geometry + render (roughly; ΔE of vectors)")
    for r in sorted(rows, key=lambda r: -r[2])[:6]:
        print(
            f"  {r[0][:26]:26} -> {r[1][:26]:26} {r[2]:5.2f}"
            f"  geometry {r[3]:5.2f}  render {r[4]:5.2f}"
        )


def _hull(points: FloatArray, parts: list[Any], shape: tuple[int, int], grow: float) -> FloatArray:
    """The parts' convex hulls, grown by ``grow`` of the face width, feathered."""
    width = float(np.ptp(points[mesh.FACE_OVAL, 0]))
    step = max(1, round(grow * width))
    mask = np.zeros(shape, np.uint8)
    for part in parts:
        hull = cv2.convexHull(np.round(points[part, :2]).astype(np.int32))
        cv2.fillConvexPoly(mask, hull, (1,))
    grown = cv2.dilate(mask, np.ones((2 * step + 1, 2 * step + 1), np.uint8)).astype(np.float32)
    return np.asarray(cv2.GaussianBlur(grown, (0, 0), max(0.5, 0.02 * width)), np.float32)


REGIONS: dict[str, Callable[[FloatArray, tuple[int, int]], FloatArray]] = {
    "eyes+brows": lambda p, s: _hull(
        p,
        [
            np.concatenate([mesh.RIGHT_EYE, mesh.RIGHT_BROW]),
            np.concatenate([mesh.LEFT_EYE, mesh.LEFT_BROW]),
        ],
        s,
        0.03,
    ),
    "nose": lambda p, s: _hull(p, [mesh.NOSE], s, 0.02),
    "mouth": lambda p, s: _hull(p, [mesh.LIPS_OUTER], s, 0.03),
}


def region_masks(points: FloatArray, shape: tuple[int, int]) -> dict[str, FloatArray]:
    """The features' regions, the skin between them (the face 3 feather sigmas in, less the
    features) and the rim (the face less that)."""
    masks = {name: make(points, shape) for name, make in REGIONS.items()}
    face = face_mask(points, shape, (0, 0, 0, 0), 0.3, 0.0)
    inner = face_mask(points, shape, (0, 0, 0, 0), 0.3, 3.0)
    features = np.maximum.reduce(list(masks.values()))
    masks["skin"] = np.clip(inner - features, 0.0, 1.0)
    masks["rim"] = np.clip(face - inner, 0.0, 1.0)
    return masks


def identity_regions(photos: Photos, recogniser: FaceRecogniser) -> None:
    backend = MeshWarpBackend()
    default, paste = FaceSwapperOptions(), FaceSwapperOptions(match_lighting=False)
    vectors = {name: recogniser.describe(*photo) for name, photo in photos.items()}
    found: dict[str, list[tuple[float, float]]] = {}
    for source, (s_frame, s_face) in photos.items():
        try:
            state = backend.prepare_source([s_face], [s_frame], default)
        except SourceUnusable:
            continue
        for target, (frame, face) in photos.items():
            if person(target) == person(source) or max(map(abs, face_pose(face))) > MAX_TARGET_TURN:
                continue
            out = backend.swap_face(frame.copy(), state, face, default).astype(np.float32)
            pasted = backend.swap_face(frame.copy(), state, face, paste).astype(np.float32)
            tuning = backend.tuning
            aimed = reshaped_points(
                s_face.landmarks, face.landmarks, tuning.reshape, tuning.outline
            )
            shape = (frame.shape[0], frame.shape[1])
            images = {"default": out, "paste": pasted}
            for name, mask in region_masks(aimed, shape).items():
                images[f"default + paste's {name}"] = out + (pasted - out) * mask[..., None]
            for name, image in images.items():
                vector = recogniser.describe(np.clip(image, 0, 255).astype(np.uint8), face)
                found.setdefault(name, []).append(
                    (
                        identity_distance(vector, vectors[source]),
                        identity_distance(vector, vectors[target]),
                    )
                )
    print("\nidentity by region (targets <= 45°, sources taken): transferred % / median d(src)")
    for name, pairs in found.items():
        d = np.array(pairs)
        rate = 100 * float(np.mean((d[:, 0] < SAME_PERSON_DISTANCE) & (d[:, 0] < d[:, 1])))
        print(f"  {name:28} n={len(d):3d} {rate:5.1f} % / {np.median(d[:, 0]):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faces", type=Path, default=FACES)
    parser.add_argument("--no-regions", action="store_true", help="the tone split only")
    args = parser.parse_args()
    photos = load_photos(FaceAnalyser(), args.faces)
    tone_split(photos)
    if not args.no_regions:
        identity_regions(photos, FaceRecogniser())


if __name__ == "__main__":
    main()
