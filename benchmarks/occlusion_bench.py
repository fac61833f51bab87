"""Occluders in front of a target face: how many of their pixels a swap leaves untouched.

    .venv/bin/python benchmarks/occlusion_bench.py [--faces DIR] [--sheet out/occlusion.png]

Every single-face photo of the folder is a target, swapped with one source (person A's selfie;
for person A's own photos the man with glasses), under three kinds of occluder made in the run:

- ``hand``: a real hand, the patch of ``group_6_faces_insightface_t1.jpg`` around the
  right-hand player's hand (holding cards, before a dark sleeve), scaled to half the face's
  height and pasted over the lower cheek and chin;
- ``blue`` / ``black`` / ``grey``: a flat-coloured rectangle (an object) over the lower
  right quarter of the face.

Per case the target is analysed as the service would (the mesh of the occluded face), swapped
with ``mask_types`` ``["box"]`` and ``["box", "occlusion"]`` (the ``["box"]`` swap with
``keep_outline``: occlusion always keeps the target's outline, so both swap the same
geometry and their difference is the occlusion mask's), and scored: the fraction of the
occluder's pixels inside the face that stay unchanged (within 3 levels per channel), and the
fraction of the rest of the face that the occlusion mask keeps from the swap (its cost).
On the clean photos: the share of the face the occlusion mask takes (false occluders).
CPU time of the occlusion mask per face is printed beside the swap's.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import cv2
import numpy as np
import numpy.typing as npt

from benchkit import FACES, engine_runtime, read_frame
from facegate.engine import mesh
from facegate.engine.faces import FaceAnalyser
from facegate.engine.processors.base import JobContext
from facegate.engine.processors.face_swapper import FaceSwapper
from facegate.engine.swap.occlusion import OcclusionDetector
from facegate.engine.swap.options import FaceSwapperOptions
from facegate.engine.types import Face, Frame
from quality import load_photos

HAND_PHOTO = "group_6_faces_insightface_t1.jpg"
HAND_BOX = (790, 330, 880, 415)  # x0, y0, x1, y1 of the patch
SOURCE = "woman_a_selfie_frontal_01.jpg"
OTHER_SOURCE = "man_frontal_glasses.jpg"
UNCHANGED = 3  # levels per channel
#: Which pixels of a frame are in a region (an occluder, the face's oval).
Mask = npt.NDArray[np.bool_]
COLOURS = {"blue": (200, 120, 40), "black": (20, 20, 20), "grey": (150, 150, 150)}


def cut_hand(folder: Path) -> Frame:
    """A real hand: the patch of HAND_PHOTO around the right-hand player's hand (holding
    cards, against a dark sleeve), pasted whole (the occluder is the hand with what it holds)."""
    x0, y0, x1, y1 = HAND_BOX
    photo = read_frame(folder / HAND_PHOTO)
    return np.ascontiguousarray(photo[y0:y1, x0:x1])


def face_box(face: Face) -> tuple[float, float, float, float]:
    lo, hi = face.landmarks[:, :2].min(axis=0), face.landmarks[:, :2].max(axis=0)
    return float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1])


def with_hand(frame: Frame, face: Face, pixels: Frame) -> tuple[Frame, Mask]:
    """``frame`` with the hand pasted over the lower cheek and chin; the occluder's mask."""
    alpha = np.ones(pixels.shape[:2], bool)
    x0, y0, x1, y1 = face_box(face)
    scale = 0.5 * (y1 - y0) / pixels.shape[0]
    size = (max(1, round(pixels.shape[1] * scale)), max(1, round(pixels.shape[0] * scale)))
    big = cv2.resize(pixels, size, interpolation=cv2.INTER_CUBIC)
    big_alpha = cv2.resize(alpha.astype(np.uint8), size, interpolation=cv2.INTER_NEAREST) > 0
    left, top = round(x0 + 0.45 * (x1 - x0)), round(y0 + 0.55 * (y1 - y0))
    out, occluder = frame.copy(), np.zeros(frame.shape[:2], bool)
    h = min(size[1], frame.shape[0] - top)
    w = min(size[0], frame.shape[1] - left)
    region = out[top : top + h, left : left + w]
    keep = big_alpha[:h, :w]
    region[keep] = big[:h, :w][keep]
    occluder[top : top + h, left : left + w] = keep
    return out, occluder


def with_object(frame: Frame, face: Face, colour: tuple[int, int, int]) -> tuple[Frame, Mask]:
    """``frame`` with a flat rectangle over the lower right quarter of the face."""
    x0, y0, x1, y1 = face_box(face)
    w, h = x1 - x0, y1 - y0
    a = (round(x0 + 0.5 * w), round(y0 + 0.5 * h))
    b = (round(x1 + 0.15 * w), round(y0 + 0.85 * h))
    out, occluder = frame.copy(), np.zeros(frame.shape[:2], np.uint8)
    cv2.rectangle(out, a, b, colour, -1)
    cv2.rectangle(occluder, a, b, (1,), -1)
    return out, occluder.astype(bool)


def oval(face: Face, shape: tuple[int, ...]) -> Mask:
    mask = np.zeros(shape[:2], np.uint8)
    cv2.fillPoly(mask, [np.round(face.landmarks[mesh.FACE_OVAL, :2]).astype(np.int32)], (1,))
    return mask.astype(bool)


def swap(
    swapper: FaceSwapper,
    source: tuple[Frame, Face],
    frame: Frame,
    face: Face,
    mask_types: list[str],
    keep_outline: bool = False,
) -> Frame:
    options = FaceSwapperOptions(mask_types=tuple(mask_types), keep_outline=keep_outline)
    ctx = JobContext(
        options={"face_swapper": options},
        source_frames=[source[0]],
        source_faces=[source[1]],
    )
    swapper.prepare(ctx)
    ctx.selected = [(0, face)]
    return swapper.process_frame(frame, ctx)


def unchanged(out: Frame, frame: Frame, where: Mask) -> float:
    same = np.abs(out.astype(np.int16) - frame.astype(np.int16)).max(axis=2) <= UNCHANGED
    return float(same[where].mean()) if where.any() else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--faces", type=Path, default=FACES)
    parser.add_argument("--sheet", type=Path, default=Path("out/occlusion.png"))
    args = parser.parse_args()

    analyser = FaceAnalyser()
    detector = OcclusionDetector()
    swapper = engine_runtime().registry.get("face_swapper")
    assert isinstance(swapper, FaceSwapper)
    photos = load_photos(analyser, args.faces)
    hand = cut_hand(args.faces)
    print(f"hand patch from {HAND_PHOTO}: {hand.shape[1]}x{hand.shape[0]} px")
    rows: dict[str, list[tuple[float, float, float]]] = {}
    false_share: list[float] = []
    mask_cpu: list[float] = []
    tiles: list[Frame] = []
    for name, (frame, face) in photos.items():
        source = photos[OTHER_SOURCE if name.startswith("woman_a_") else SOURCE]
        area = oval(face, frame.shape)
        start = time.process_time()
        clean_mask = detector.mask(frame, face)
        mask_cpu.append(time.process_time() - start)
        x0, y0, x1, y1 = clean_mask.box
        false_share.append(float((clean_mask.mask > 0.5)[area[y0:y1, x0:x1]].mean()))
        cases = {"hand": with_hand(frame, face, hand)}
        cases.update({c: with_object(frame, face, v) for c, v in COLOURS.items()})
        for case, (occluded, occluder) in cases.items():
            found = analyser.analyse(occluded)
            if not found:
                print(f"  {name} {case}: no face found once occluded")
                continue
            target = min(found, key=lambda f: float(np.linalg.norm(f.box - face.box)))
            where = occluder & oval(target, frame.shape)
            rest = ~occluder & oval(target, frame.shape)
            before = swap(swapper, source, occluded, target, ["box"], keep_outline=True)
            after = swap(swapper, source, occluded, target, ["box", "occlusion"])
            kept_before = unchanged(before, occluded, where)
            kept_after = unchanged(after, occluded, where)
            # The swap's cost: face pixels (not the occluder) that the occlusion mask undid.
            undone = 1.0 - unchanged(after, before, rest)
            rows.setdefault(case, []).append((kept_before, kept_after, undone))
            print(
                f"  {name:40s} {case:5s} occluder kept {kept_before:6.1%} -> {kept_after:6.1%}"
                f"   rest of face undone {undone:5.1%}"
            )
            if case in ("hand", "blue"):
                tiles.append(
                    np.hstack(
                        [_tile(occluded, target), _tile(before, target), _tile(after, target)]
                    )
                )
    print("\noccluder pixels inside the face left unchanged (median over targets):")
    print(f"{'occluder':10s} {'box':>8s} {'box+occlusion':>14s} {'face undone':>12s}  n")
    for case, values in rows.items():
        b, a, u = (statistics.median(v[i] for v in values) for i in range(3))
        print(f"{case:10s} {b:8.1%} {a:14.1%} {u:12.1%}  {len(values)}")
    print(
        f"\nclean photos: share of the face taken as occluder, median "
        f"{statistics.median(false_share):.1%}, max {max(false_share):.1%} "
        f"({len(false_share)} photos)"
    )
    print(f"occlusion mask CPU per face: median {statistics.median(mask_cpu) * 1000:.1f} ms")
    args.sheet.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(args.sheet), np.vstack(tiles))
    print(f"sheet (occluded | box | box+occlusion): {args.sheet}")
    detector.close()
    analyser.close()


def _tile(frame: Frame, face: Face, size: int = 200) -> Frame:
    x0, y0, x1, y1 = face_box(face)
    pad = 0.25 * max(x1 - x0, y1 - y0)
    a, b = max(0, round(x0 - pad)), max(0, round(y0 - pad))
    c, d = min(frame.shape[1], round(x1 + pad)), min(frame.shape[0], round(y1 + pad))
    return np.asarray(cv2.resize(frame[b:d, a:c], (size, size)), np.uint8)


if __name__ == "__main__":
    main()
