"""Quality of the built-in swap over every source × target pair of a folder of faces.

    .venv/bin/python benchmarks/quality.py [--faces DIR] [--out out/quality_sheet.png]

Per pair and in total: the output still detected as a face (rate); landmark error of the
output's mesh vs the target's, in % of the target's inter-ocular distance; seam energy (mean
gradient magnitude of L* on the mask border ÷ inside the face, the same ratio on the
untouched target printed beside it); skin colour ΔE (CIEDE2000) between the swapped cheeks
and the target's own forehead band above the trimmed mask. Writes a contact sheet (rows:
sources, columns: targets) and times the swap per face at 1080p (median ms per stage).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import cv2
import numpy as np

from benchkit import FACES
from facegate.engine import mesh
from facegate.engine.faces import FaceAnalyser
from facegate.engine.swap.masks import face_mask, keep_mask, polygon_mask, trimmed_oval
from facegate.engine.swap.mesh_warp import MeshWarpBackend
from facegate.engine.swap.options import FaceSwapperOptions
from facegate.engine.types import Face, Frame

TILE = 160


def delta_e2000(lab1: np.ndarray, lab2: np.ndarray) -> float:
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


def lab(frame: Frame) -> np.ndarray:
    return cv2.cvtColor(frame.astype(np.float32) / 255.0, cv2.COLOR_BGR2Lab)


def seam_ratio(frame: Frame, mask: np.ndarray) -> float:
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


def skin_delta_e(out: Frame, target: Frame, face: Face) -> float:
    """ΔE2000 of the mean skin colour: swapped cheeks vs the target's own forehead band."""
    shape = out.shape[:2]
    points = face.landmarks
    inside = (face_mask(points, shape, (0, 0, 0, 0), 0.3) > 0.9) & (
        keep_mask(points, points, shape) < 0.1
    )
    brows = polygon_mask(points, mesh.LEFT_BROW, shape) + polygon_mask(
        points, mesh.RIGHT_BROW, shape
    )
    lips = polygon_mask(points, mesh.LIPS_OUTER, shape)
    cheeks = inside & (brows == 0) & (lips == 0)
    full = polygon_mask(points, mesh.FACE_OVAL, shape) > 0.5
    trimmed = np.zeros(shape, np.uint8)
    cv2.fillPoly(trimmed, [np.round(trimmed_oval(points)).astype(np.int32)], (1,))
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
    return cv2.resize(crop, (TILE, TILE), interpolation=cv2.INTER_AREA)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faces", type=Path, default=FACES)
    parser.add_argument("--out", type=Path, default=Path("out/quality_sheet.png"))
    parser.add_argument("--mask", default="feather", choices=["feather", "poisson"])
    args = parser.parse_args()
    analyser = FaceAnalyser()
    backend = MeshWarpBackend()
    options = FaceSwapperOptions(mask=args.mask)
    photos: dict[str, tuple[Frame, Face]] = {}
    for path in sorted(args.faces.iterdir()):
        frame = cv2.imread(str(path), cv2.IMREAD_COLOR)
        faces = analyser.analyse(frame) if frame is not None else []
        if len(faces) == 1:  # single-face photos: the pair is unambiguous
            photos[path.name] = (frame, faces[0])
    names = list(photos)
    header = [np.zeros((TILE, TILE, 3), np.uint8)] + [tile(*photos[n]) for n in names]
    rows = [np.hstack(header)]
    detected, errors, seams, seams_ref, deltas = [], [], [], [], []
    print(f"{'source':34} {'target':34} found  err%  seam(ref)   dE00")
    for source in names:
        state = backend.prepare_source([photos[source][1]], [photos[source][0]], options)
        row = [tile(*photos[source])]
        for target in names:
            frame, face = photos[target]
            if source == target:
                row.append(np.zeros((TILE, TILE, 3), np.uint8))
                continue
            out = backend.swap_face(frame.copy(), state, face, options)  # it pastes in place
            row.append(tile(out, face))
            found = analyser.analyse(out)
            detected.append(bool(found))
            err = float("nan")
            if found:
                best = min(found, key=lambda f: np.linalg.norm(f.box - face.box))
                err = (
                    100
                    * float(
                        np.linalg.norm(best.landmarks[:, :2] - face.landmarks[:, :2], axis=1).mean()
                    )
                    / face.inter_ocular
                )
                errors.append(err)
            mask = face_mask(face.landmarks, frame.shape[:2], (0, 0, 0, 0), 0.3)
            seam, seam_ref = seam_ratio(out, mask), seam_ratio(frame, mask)
            de = skin_delta_e(out, frame, face)
            seams.append(seam)
            seams_ref.append(seam_ref)
            deltas.append(de)
            print(
                f"{source:34} {target:34} {found != []!s:5} {err:5.1f} "
                f"{seam:5.2f}({seam_ref:4.2f}) {de:6.1f}"
            )
        rows.append(np.hstack(row))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(args.out), np.vstack(rows))

    def med(values: list[float]) -> float:
        return float(np.nanmedian(values)) if values else float("nan")

    print(f"\npairs {len(detected)}  mask {args.mask}")
    print(f"detected as a face: {100 * np.mean(detected):.1f} %")
    print(
        f"landmark error % IO: median {med(errors):.2f}  p90 {np.nanpercentile(errors, 90):.2f}"
        f"  max {np.nanmax(errors):.2f}"
    )
    print(f"seam energy ratio: median {med(seams):.2f} (untouched targets {med(seams_ref):.2f})")
    print(
        f"skin dE2000 cheeks vs target forehead: median {med(deltas):.1f}"
        f" (untouched targets {med([skin_delta_e(f, f, fc) for f, fc in photos.values()]):.1f})"
    )
    print(f"sheet: {args.out}")
    time_1080p(backend, options, photos)


def time_1080p(
    backend: MeshWarpBackend, options: FaceSwapperOptions, photos: dict[str, tuple[Frame, Face]]
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
        print(f"1080p swap ({mask}, face {target.width:.0f} px): {parts}  total {total:.1f} ms")


if __name__ == "__main__":
    main()
