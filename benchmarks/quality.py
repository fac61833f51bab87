"""Quality of the built-in swap over every source × target pair of a folder of faces.

    .venv/bin/python benchmarks/quality.py [--faces DIR] [--out out/quality_sheet.png]
        [--only NAME_PREFIX ...] [--no-timing] [--tuning FIELD=VALUE[,FIELD=VALUE] ...]

Pairs: every source × target of the folder's single-face photos. Identity, by an independent
recogniser (dlib's ResNet descriptor, ``engine.identity``; under 0.6 = one person): per pair
d(result, source), d(result, target), d(source, target); "identity transferred" = the result
is under 0.6 from the source and nearer the source than the target. Rates and medians are over
pairs of different people (and again over those whose target is turned at most 45°, the
issue's goal: a refused source counts there as not transferred; beside it, "taken": the same
pairs less those whose source was refused); person A's three photos
(``woman_a_*``) check the metric itself (their distances must be under 0.6, every other
pair's over).

Realism, per pair and in total: the output still detected as a face (rate); landmark error of the
output's mesh vs the target's, in % of the target's inter-ocular distance; seam energy (mean
gradient magnitude of L* on the mask border ÷ inside the face, the same ratio on the
untouched target printed beside it); skin colour ΔE (CIEDE2000) between the swapped cheeks
and the target's own forehead band above the trimmed mask; the **tone** figure: CIE76 ΔE of
the mean L*a*b* of two cheek patches (placed from the eye and nose landmarks,
``engine.tone``) in the result against the same patches in the target (median and worst).
Writes a contact sheet (rows: sources, columns: targets) and times the swap per face at 1080p
(median ms per stage).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt

from benchkit import FACES, read_frames
from facegate.engine import mesh
from facegate.engine.errors import SourceUnusable
from facegate.engine.faces import FaceAnalyser
from facegate.engine.identity import SAME_PERSON_DISTANCE, FaceRecogniser, identity_distance
from facegate.engine.report import face_pose
from facegate.engine.swap.color import DETAIL_GAIN
from facegate.engine.swap.masks import face_mask, keep_mask, polygon_mask, trimmed_oval
from facegate.engine.swap.mesh_warp import BEFORE_IDENTITY, MeshWarpBackend, Tuning
from facegate.engine.swap.options import FaceSwapperOptions
from facegate.engine.swap.reshape import reshaped_points
from facegate.engine.tone import tone_delta_e
from facegate.engine.types import Face, FloatArray, Frame

TILE = 160
#: The identity goal's pairs (issue 29): those whose target is turned at most this far.
MAX_TARGET_TURN = 45.0
#: The photos whose pairs the identity tuning of issue 16 was iterated on (``--only`` these);
#: the other pairs are summarised apart, as pairs not tuned on.
TUNED = [
    "woman_a_selfie_frontal_01.jpg",
    "man_frontal_glasses.jpg",
    "woman_b_frontal_dark_background.jpg",
    "man_frontal_beard_closeup.jpg",
    "woman_astronaut_frontal.jpg",
    "elderly_woman_glasses_frontal.jpg",
]
#: The tuning with the target's outline kept (``first pass``), measured beside the default.
FIRST_PASS = replace(
    Tuning(),
    outline=0.0,
    low_pass=0.035,
    detail_gain=DETAIL_GAIN,
    max_source_turn=90.0,
    mask_inset=1.5,
)
#: The before/after sheet (--docs-sheet; docs/identity_before_after.jpg is this sheet): only
#: the photos whose sources put them in the public domain or under an open licence that covers
#: the image (SOURCES.md): the NASA astronaut portrait, the camera man (CC0) and the US Navy
#: portrait shipped with matplotlib. The sheet shows swap results only, never a photo as is.
DOCS_PHOTOS = [
    "woman_astronaut_frontal.jpg",
    "elderly_woman_glasses_frontal.jpg",
    "man_profile_grayscale_occluded.png",
]


def delta_e2000(lab1: npt.NDArray[np.float32], lab2: npt.NDArray[np.float32]) -> float:
    """CIEDE2000 between two L*a*b* colours (Sharma et al. 2005)."""
    l1, a1, b1 = (float(v) for v in lab1)
    l2, a2, b2 = (float(v) for v in lab2)
    c1, c2 = np.hypot(a1, b1), np.hypot(a2, b2)
    cm = (c1 + c2) / 2
    g = 0.5 * (1 - np.sqrt(cm**7 / (cm**7 + 25**7)))
    a1p, a2p = a1 * (1 + g), a2 * (1 + g)
    c1p, c2p = np.hypot(a1p, b1), np.hypot(a2p, b2)
    h1p = np.degrees(np.arctan2(b1, a1p)) % 360
    h2p = np.degrees(np.arctan2(b2, a2p)) % 360
    dl, dc = l2 - l1, c2p - c1p
    dh = h2p - h1p
    if c1p * c2p == 0:
        dh = 0.0
    elif dh > 180:
        dh -= 360
    elif dh < -180:
        dh += 360
    dhp = 2 * np.sqrt(c1p * c2p) * np.sin(np.radians(dh / 2))
    lm, cmp_ = (l1 + l2) / 2, (c1p + c2p) / 2
    hm = h1p + h2p
    if c1p * c2p != 0:
        hm = hm / 2 if abs(h1p - h2p) <= 180 else (hm + 360) / 2 if hm < 360 else (hm - 360) / 2
    t = (
        1
        - 0.17 * np.cos(np.radians(hm - 30))
        + 0.24 * np.cos(np.radians(2 * hm))
        + 0.32 * np.cos(np.radians(3 * hm + 6))
        - 0.20 * np.cos(np.radians(4 * hm - 63))
    )
    sl = 1 + 0.015 * (lm - 50) ** 2 / np.sqrt(20 + (lm - 50) ** 2)
    sc, sh = 1 + 0.045 * cmp_, 1 + 0.015 * cmp_ * t
    rt = (
        -2
        * np.sqrt(cmp_**7 / (cmp_**7 + 25**7))
        * np.sin(np.radians(60 * np.exp(-(((hm - 275) / 25) ** 2))))
    )
    return float(
        np.sqrt((dl / sl) ** 2 + (dc / sc) ** 2 + (dhp / sh) ** 2 + rt * (dc / sc) * (dhp / sh))
    )


def lab(frame: Frame) -> npt.NDArray[np.float32]:
    return np.asarray(cv2.cvtColor(frame.astype(np.float32) / 255.0, cv2.COLOR_BGR2Lab), np.float32)


def seam_ratio(frame: Frame, mask: FloatArray) -> float:
    """Mean |∇L*| on a 3-px band around the mask border ÷ mean |∇L*| inside the face."""
    light = lab(frame)[..., 0]
    grad = np.hypot(cv2.Sobel(light, cv2.CV_32F, 1, 0), cv2.Sobel(light, cv2.CV_32F, 0, 1))
    hard = (mask > 0.5).astype(np.uint8)
    k = np.ones((3, 3), np.uint8)
    band = (cv2.dilate(hard, k, iterations=2) - cv2.erode(hard, k, iterations=2)) > 0
    inside = cv2.erode(hard, k, iterations=6) > 0
    if band.sum() == 0 or inside.sum() == 0:
        return float("nan")
    return float(grad[band].mean() / max(grad[inside].mean(), 1e-6))


def skin_delta_e(out: Frame, target: Frame, face: Face, aimed: FloatArray | None = None) -> float:
    """ΔE2000 of the mean skin colour: swapped cheeks (on the mesh the swap aimed at, when
    given: with a moved outline the face is there) vs the target's own forehead band."""
    shape = (out.shape[0], out.shape[1])
    points = face.landmarks if aimed is None else aimed
    inside = (face_mask(points, shape, (0, 0, 0, 0), 0.3) > 0.9) & (
        keep_mask(points, points, shape) < 0.1
    )
    brows = polygon_mask(points, mesh.LEFT_BROW, shape) + polygon_mask(
        points, mesh.RIGHT_BROW, shape
    )
    lips = polygon_mask(points, mesh.LIPS_OUTER, shape)
    cheeks = inside & (brows == 0) & (lips == 0)
    own = face.landmarks
    full = polygon_mask(own, mesh.FACE_OVAL, shape) > 0.5
    trimmed = np.zeros(shape, np.uint8)
    cv2.fillPoly(trimmed, [np.round(trimmed_oval(own)).astype(np.int32)], (1,))
    forehead = full & (trimmed == 0)
    if cheeks.sum() < 20 or forehead.sum() < 20:
        return float("nan")
    return delta_e2000(
        np.median(lab(out)[cheeks], axis=0), np.median(lab(target)[forehead], axis=0)
    )


def tile(frame: Frame, face: Face) -> Frame:
    c = face.landmarks[:, :2].mean(axis=0)
    s = max(face.width, face.height) * 0.8
    x0, y0 = int(max(0, c[0] - s)), int(max(0, c[1] - s))
    crop = frame[y0 : int(c[1] + s), x0 : int(c[0] + s)]
    return np.asarray(cv2.resize(crop, (TILE, TILE), interpolation=cv2.INTER_AREA), np.uint8)


def person(name: str) -> str:
    """Who a photo shows: ``woman_a_*`` files are one person (SOURCES.md), others one each."""
    parts = name.split("_")
    return "_".join(parts[:2]) if len(parts) > 2 and len(parts[1]) == 1 else name


@dataclass
class Pair:
    """One source × target swap and what was measured on it."""

    source: str
    target: str
    found: bool
    landmark_error: float  # % of the target's inter-ocular distance (nan: not found)
    moved_error: float  # the same against the mesh the swap aimed at (reshaped towards the source)
    seam: float
    seam_ref: float
    delta_e: float
    d_source: float  # recogniser distance of the result to the source photo
    d_target: float  # ... to the target photo
    d_pair: float  # source photo to target photo
    tone: float = float("nan")  # CIE76 ΔE of the cheek patches, result vs target (engine.tone)
    # The swapper refused the source (``SourceUnusable``): the user keeps the target as it
    # was, so d(result, source) is d(source, target) and d(result, target) 0; no realism.
    refused: bool = False
    target_turn: float = 0.0  # the target face's yaw or pitch, whichever is larger, degrees

    @property
    def same_person(self) -> bool:
        return person(self.source) == person(self.target)

    @property
    def transferred(self) -> bool:
        """The result is recognised as the source: under the threshold, nearer than the target."""
        return self.d_source < SAME_PERSON_DISTANCE and self.d_source < self.d_target


def load_photos(analyser: FaceAnalyser, folder: Path) -> dict[str, tuple[Frame, Face]]:
    """The single-face photos of ``folder`` (the pair is unambiguous) and their face."""
    photos: dict[str, tuple[Frame, Face]] = {}
    for name, frame in read_frames(folder).items():
        faces = analyser.analyse(frame)
        if len(faces) == 1:
            photos[name] = (frame, faces[0])
    return photos


def swap_pair(
    tools: tuple[FaceAnalyser, FaceRecogniser],
    backend: MeshWarpBackend,
    options: FaceSwapperOptions,
    state: object,
    target: tuple[Frame, Face],
) -> tuple[Frame, Face | None, FloatArray]:
    """The swapped frame, the face found in it (None: none) and its descriptor."""
    analyser, recogniser = tools
    frame, face = target
    out = backend.swap_face(frame.copy(), state, face, options)  # it pastes in place
    found = analyser.analyse(out)
    best = min(found, key=lambda f: np.linalg.norm(f.box - face.box)) if found else None
    return out, best, recogniser.describe(out, best or face)


def measure(
    tools: tuple[FaceAnalyser, FaceRecogniser],
    backend: MeshWarpBackend,
    options: FaceSwapperOptions,
    photos: dict[str, tuple[Frame, Face]],
    pairs: list[tuple[str, str]],
    descriptors: dict[str, FloatArray],
) -> tuple[list[Pair], dict[tuple[str, str], Frame]]:
    """Every pair swapped and measured; the tiles of the results for the sheets."""
    results, tiles = [], {}
    states: dict[str, object] = {}
    for source, target in pairs:
        if source not in states:
            frame, face = photos[source]
            try:
                states[source] = backend.prepare_source([face], [frame], options)
            except SourceUnusable as refusal:
                states[source] = refusal
        frame, face = photos[target]
        turn = max(abs(angle) for angle in face_pose(face))
        if isinstance(states[source], SourceUnusable):
            results.append(replace(refused_pair(source, target, descriptors), target_turn=turn))
            tiles[source, target] = refused_tile()
            continue
        out, best, vector = swap_pair(tools, backend, options, states[source], photos[target])
        tiles[source, target] = tile(out, face)
        tuning = backend.tuning
        aimed = reshaped_points(
            photos[source][1].landmarks, face.landmarks, tuning.reshape, tuning.outline
        )
        err = moved = float("nan")
        if best is not None:
            err = landmark_error(best, face.landmarks, face.inter_ocular)
            moved = landmark_error(best, aimed, face.inter_ocular)
        # The seam is measured where the swap's mask ends: on the mesh it aimed at (with a
        # moved outline, not the target's own oval); the untouched photo on the target's.
        shape = (frame.shape[0], frame.shape[1])
        mask = face_mask(aimed, shape, (0, 0, 0, 0), 0.3)
        own = face_mask(face.landmarks, shape, (0, 0, 0, 0), 0.3)
        results.append(
            Pair(
                source=source,
                target=target,
                found=best is not None,
                landmark_error=err,
                moved_error=moved,
                seam=seam_ratio(out, mask),
                seam_ref=seam_ratio(frame, own),
                delta_e=skin_delta_e(out, frame, face, aimed),
                d_source=identity_distance(vector, descriptors[source]),
                d_target=identity_distance(vector, descriptors[target]),
                d_pair=identity_distance(descriptors[source], descriptors[target]),
                tone=tone_delta_e(out, frame, face.landmarks, aimed),
                target_turn=turn,
            )
        )
    return results, tiles


def refused_pair(source: str, target: str, descriptors: dict[str, FloatArray]) -> Pair:
    nan, d_pair = float("nan"), identity_distance(descriptors[source], descriptors[target])
    return Pair(source, target, True, nan, nan, nan, nan, nan, d_pair, 0.0, d_pair, refused=True)


def refused_tile() -> Frame:
    """A refused pair's tile: no result (the user gets the target back as it was), so a grey
    tile that says so; the sheets show swap results only, never a photo as is."""
    shown = np.full((TILE, TILE, 3), 200, np.uint8)
    cv2.putText(shown, "refused", (8, TILE // 2), cv2.FONT_HERSHEY_SIMPLEX, 0.8, (0, 0, 200), 2)
    return shown


def tuned_half(pair: tuple[str, str], names: list[str]) -> bool:
    """The half of the pairs the outline was tuned on ("half A"): the two photos' indices
    (sorted names) add up to an even number. Every photo is a source and a target in both
    halves; the other ("half B") checks that the tuning did not fit these pairs only."""
    return (names.index(pair[0]) + names.index(pair[1])) % 2 == 0


def landmark_error(found: Face, points: FloatArray, inter_ocular: float) -> float:
    """Mean landmark distance, in % of the inter-ocular distance."""
    gaps = np.linalg.norm(found.landmarks[:, :2] - points[:, :2], axis=1)
    return 100 * float(gaps.mean()) / inter_ocular


def med(values: Iterable[float]) -> float:
    picked = [v for v in values if not np.isnan(v)]
    return float(np.median(picked)) if picked else float("nan")


def print_pairs(label: str, results: list[Pair]) -> None:
    print(f"\n[{label}]")
    print(
        f"{'source':34} {'target':34} found  err%  seam(ref)   dE00  tone  d(src) d(tgt) d(s,t) id"
    )
    for r in results:
        print(
            f"{r.source:34} {r.target:34} {r.found!s:5} {r.landmark_error:5.1f} "
            f"{r.seam:5.2f}({r.seam_ref:4.2f}) {r.delta_e:6.1f} {r.tone:5.1f}  "
            f"{r.d_source:5.3f}  {r.d_target:5.3f}  {r.d_pair:5.3f} "
            f"{'yes' if r.transferred else 'refused' if r.refused else '-'}"
        )


def summary(results: list[Pair]) -> dict[str, float]:
    """The headline figures over the pairs of different people."""
    others = [r for r in results if not r.same_person]
    # The identity goal counts the pairs whose target is turned at most 45°.
    facing = [r for r in others if r.target_turn <= MAX_TARGET_TURN] or others
    # The same pairs less those whose source was refused (the user is told, ``SourceUnusable``):
    # what the swaps that ran carried. Beside the goal's figure, never instead of it.
    taken = [r for r in facing if not r.refused] or facing
    nan = float("nan")
    errors = [r.landmark_error for r in results]
    return {
        "pairs": len(others),
        "transferred %": 100 * float(np.mean([r.transferred for r in others])),
        "median d(result, source)": med(r.d_source for r in others),
        "transferred %, target <= 45°": 100 * float(np.mean([r.transferred for r in facing])),
        "median d(result, source), target <= 45°": med(r.d_source for r in facing),
        "transferred %, target <= 45°, source taken": 100
        * float(np.mean([r.transferred for r in taken])),
        "median d(result, source), target <= 45°, source taken": med(r.d_source for r in taken),
        "median d(result, target)": med(r.d_target for r in others),
        "median d(source, target)": med(r.d_pair for r in others),
        "refused": sum(r.refused for r in others),
        "detected as a face %": 100 * float(np.mean([r.found for r in results if not r.refused])),
        "landmark error % IO median": med(errors),
        "landmark error % IO p90": float(np.nanpercentile(errors, 90)),
        "  vs the aimed (moved) mesh, median": med(r.moved_error for r in results),
        "seam ratio median": med(r.seam for r in results),
        "skin dE2000 median": med(r.delta_e for r in results),
        "tone dE76 median": med(r.tone for r in results),
        "tone dE76 worst": max((r.tone for r in results if not np.isnan(r.tone)), default=nan),
    }


SHORT = {
    "pairs": "pairs",
    "transferred %": "id %",
    "median d(result, source)": "d(src)",
    "transferred %, target <= 45°": "id%<=45",
    "median d(result, source), target <= 45°": "d<=45",
    "transferred %, target <= 45°, source taken": "id%taken",
    "median d(result, source), target <= 45°, source taken": "d taken",
    "median d(result, target)": "d(tgt)",
    "median d(source, target)": "d(s,t)",
    "refused": "refused",
    "detected as a face %": "found %",
    "landmark error % IO median": "lm err",
    "landmark error % IO p90": "lm p90",
    "  vs the aimed (moved) mesh, median": "vs aim",
    "seam ratio median": "seam",
    "skin dE2000 median": "dE00",
    "tone dE76 median": "tone",
    "tone dE76 worst": "tone max",
}


def print_summaries(columns: dict[str, dict[str, float]], reference: dict[str, float]) -> None:
    """One line per tuning and set of pairs (the untouched photos last)."""
    keys = list(next(iter(columns.values())))
    print(f"\n{'':24}" + "".join(f"{SHORT.get(k, k):>9}" for k in keys))
    for name, values in [*columns.items(), ("untouched", reference)]:
        cells = "".join(f"{values.get(k, float('nan')):9.3f}" for k in keys)
        print(f"{name:24}{cells}")


def same_person_check(descriptors: dict[str, FloatArray]) -> None:
    """The metric itself: photos of one person under the threshold, others above."""
    names = list(descriptors)
    same: list[float] = []
    other: list[float] = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            d = identity_distance(descriptors[a], descriptors[b])
            (same if person(a) == person(b) else other).append(d)
    if same:
        print(
            f"recogniser check: same-person photo pairs {len(same)}, distances "
            f"{', '.join(f'{d:.3f}' for d in sorted(same))} (all < {SAME_PERSON_DISTANCE}: "
            f"{all(d < SAME_PERSON_DISTANCE for d in same)})"
        )
    if other:
        print(
            f"recogniser check: different-person pairs {len(other)}, min {min(other):.3f}, "
            f"median {med(other):.3f}, under {SAME_PERSON_DISTANCE}: "
            f"{sum(d < SAME_PERSON_DISTANCE for d in other)}"
        )


def sheet(
    names: list[str], photos: dict[str, tuple[Frame, Face]], tiles: dict[tuple[str, str], Frame]
) -> Frame:
    """Rows: sources, columns: targets; the originals along the top and the left."""
    blank = np.zeros((TILE, TILE, 3), np.uint8)
    rows = [np.hstack([blank] + [tile(*photos[n]) for n in names])]
    for source in names:
        cells = [tiles.get((source, target), blank) for target in names]
        rows.append(np.hstack([tile(*photos[source]), *cells]))
    return np.vstack(rows)


def before_after_sheet(
    names: list[str],
    columns: list[tuple[str, dict[tuple[str, str], Frame]]],
) -> Frame:
    """One row per source x target pair of ``names`` (different photos): the result of each
    tuning in ``columns`` side by side, labelled; no photo as it was."""
    label_height = 22
    rows = []
    for source in names:
        for target in names:
            if source == target:
                continue
            cells = []
            for label, tiles in columns:
                cell = np.zeros((TILE + label_height, TILE, 3), np.uint8)
                cell[label_height:] = tiles[source, target]
                cv2.putText(
                    cell, label, (4, 16), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (255, 255, 255), 1
                )
                cells.append(cell)
            caption = np.zeros((label_height, TILE * len(columns), 3), np.uint8)
            text = f"{source.split('_')[0]}_{source.split('_')[1]} -> {target.split('_')[0]}_"
            text += target.split("_")[1]
            cv2.putText(caption, text, (4, 16), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (200, 200, 255), 1)
            rows.append(np.vstack([caption, np.hstack(cells)]))
    half = (len(rows) + 1) // 2
    left, right = rows[:half], rows[half:]
    right += [np.zeros_like(rows[0])] * (len(left) - len(right))
    gap = np.full((sum(r.shape[0] for r in left), 8, 3), 255, np.uint8)
    return np.hstack([np.vstack(left), gap, np.vstack(right)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faces", type=Path, default=FACES)
    parser.add_argument("--out", type=Path, default=Path("out/quality_sheet.png"))
    parser.add_argument("--mask", default="feather", choices=["feather", "poisson"])
    parser.add_argument(
        "--only", nargs="*", default=None, help="photo names (a subset to iterate on quickly)"
    )
    parser.add_argument(
        "--no-before", action="store_true", help="skip the swap as it was before issue 16"
    )
    parser.add_argument(
        "--docs-sheet",
        type=Path,
        default=None,
        help="also write a before/after sheet of the DOCS_PHOTOS pairs (JPEG)",
    )
    parser.add_argument("--no-timing", action="store_true", help="skip the 1080p timing")
    parser.add_argument(
        "--tuning",
        action="append",
        default=[],
        type=tuning_variant,
        help="also measure the default Tuning with these fields changed, e.g."
        " cheek_tone_sigma=0 or tone_sigma=0.07,skin_mid=0.3 (repeatable)",
    )
    args = parser.parse_args()
    analyser = FaceAnalyser()
    recogniser = FaceRecogniser()
    photos = load_photos(analyser, args.faces)
    if args.only:
        photos = {n: photos[n] for n in photos if any(n.startswith(o) for o in args.only)}
    names = list(photos)
    descriptors = {n: recogniser.describe(*photos[n]) for n in names}
    same_person_check(descriptors)
    pairs = [(s, t) for s in names for t in names if s != t]
    options = FaceSwapperOptions(mask=args.mask)
    tunings = {"now": Tuning()}
    if not args.no_before:
        tunings = {"before": BEFORE_IDENTITY, "first pass": FIRST_PASS, "now": Tuning()}
    tunings.update(args.tuning)
    columns, tiles = {}, {}
    for label, tuning in tunings.items():
        results, tiles[label] = measure(
            (analyser, recogniser), MeshWarpBackend(tuning), options, photos, pairs, descriptors
        )
        print_pairs(label, results)
        columns[label] = summary(results)
        held_out = [r for r in results if r.source not in TUNED or r.target not in TUNED]
        if held_out and len(held_out) < len(results):
            columns[f"{label}, untuned"] = summary(held_out)
        halves = [tuned_half((r.source, r.target), names) for r in results]
        if any(halves) and not all(halves):
            columns[f"{label}, half A"] = summary(
                [r for r, h in zip(results, halves, strict=True) if h]
            )
            columns[f"{label}, half B"] = summary(
                [r for r, h in zip(results, halves, strict=True) if not h]
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(args.out), sheet(names, photos, tiles["now"]))
    if args.docs_sheet and "before" in tiles:
        docs = before_after_sheet(
            [n for n in DOCS_PHOTOS if n in photos],
            [(label, tiles[label]) for label in tunings],
        )
        cv2.imwrite(str(args.docs_sheet), docs, [cv2.IMWRITE_JPEG_QUALITY, 80])
    untouched = {
        "seam ratio median": med(r.seam_ref for r in results),
        "skin dE2000 median": med(skin_delta_e(f, f, fc) for f, fc in photos.values()),
    }
    print(
        f"\nmask {args.mask}; identity over pairs of different people, realism over all;"
        " 'untuned': the pairs not both among TUNED"
    )
    print_summaries(columns, untouched)
    print(f"sheet: {args.out}")
    if not args.no_timing:
        for label, tuning in tunings.items():
            time_1080p(label, MeshWarpBackend(tuning), options, photos)


def tuning_variant(text: str) -> tuple[str, Tuning]:
    """``--tuning``'s argument as (its label, the default Tuning with those fields set)."""
    fields = {f.name: f for f in dataclasses.fields(Tuning)}
    changes: dict[str, object] = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        if name not in fields or not value:
            raise argparse.ArgumentTypeError(f"{part!r}: not FIELD=VALUE of a Tuning field")
        default = getattr(Tuning(), name)
        if isinstance(default, bool):
            changes[name] = value.lower() in ("1", "true", "yes")
        elif isinstance(default, (int, float)):
            changes[name] = type(default)(float(value))
        else:
            raise argparse.ArgumentTypeError(f"{name}: only number and true/false fields")
    return text, replace(Tuning(), **changes)  # type: ignore[arg-type]


def time_1080p(
    label: str,
    backend: MeshWarpBackend,
    options: FaceSwapperOptions,
    photos: dict[str, tuple[Frame, Face]],
) -> None:
    """Median ms per stage of one face swap on a 1080p frame (a photo scaled to 1080 rows)."""
    names = list(photos)
    frame, face = photos[
        "woman_a_frontal_blue_wall_02.jpg"
        if "woman_a_frontal_blue_wall_02.jpg" in photos
        else names[0]
    ]
    scale = 1080 / frame.shape[0]
    big = cv2.resize(frame, None, fx=scale, fy=scale, interpolation=cv2.INTER_LINEAR)
    canvas = np.zeros((1080, 1920, 3), np.uint8)
    canvas[:, : min(1920, big.shape[1])] = big[:, :1920]
    target = Face(
        box=face.box * scale,
        score=face.score,
        keypoints5=face.keypoints5 * scale,
        landmarks=face.landmarks * scale,
    )
    source_frame, source_face = photos[names[-1]]
    for mask in ("feather", "poisson"):
        opts = options.model_copy(update={"mask": mask})
        state = backend.prepare_source([source_face], [source_frame], opts)
        stages: dict[str, list[float]] = {}
        for _ in range(15):
            timings: dict[str, float] = {}
            backend.swap_face(canvas.copy(), state, target, opts, timings=timings)
            for key, value in timings.items():
                stages.setdefault(key, []).append(value * 1000)
        per = {k: statistics.median(v) for k, v in stages.items()}
        total = sum(per.values())
        parts = "  ".join(f"{k} {v:.1f}" for k, v in per.items())
        print(
            f"1080p swap, {label} ({mask}, face {target.width:.0f} px): {parts}"
            f"  total {total:.1f} ms"
        )


if __name__ == "__main__":
    main()
