"""A source's fringe: hair hanging over its forehead, kept out of what the swap takes.

The mask's forehead reaches half way from the brows to the hairline (``masks.trimmed_oval``),
and a fringe or strands that come lower were taken as the source's face: on every target a
dark band above the brows (the astronaut's portrait and the face looking up in
``benchmarks/quality.py``).
Found without a model: on the forehead inside the trimmed oval, above the brows, the pixels
much darker than the face's own skin (the mean of ``engine.tone``'s cheek patches). The swap
treats them as it treats a source's painted-out glasses (``color.Detail.hole``): the target's
own forehead shows there. (Also taking them out of the source's face-only low-pass, which
averages them into the skin beside them, moved the median distance to the source from
0.495 to 0.496 and changed nothing seen: not done.)
"""

from __future__ import annotations

import cv2
import numpy as np

from facegate.engine import mesh
from facegate.engine.swap.geometry import FloatArray
from facegate.engine.swap.masks import face_axes, trimmed_oval
from facegate.engine.tone import cheek_lab
from facegate.engine.types import Frame

#: How much darker than the cheeks' mean L* (0-100) a forehead pixel is for hair (the 11
#: photos of shared/data/faces: the darkest tenth of the forehead lies 41-59 below the
#: cheeks on the two fringes, 6-14 below on most bare foreheads; a shaded temple or a
#: parting deeper, which MIN_SHARE leaves out).
FRINGE_DARKER = 20.0
#: Where the forehead starts above the brows' top, of the eye distance (the brows' own
#: hairs and their shadow are no fringe).
BROW_MARGIN = 0.05
#: Fewer hair pixels than this share of the forehead: none (a shadowed brow ridge or temple,
#: a parting at the corner). On shared/data/faces: the astronaut 0.29, the face looking up
#: 0.23 (fringes); the bearded man's shaded brow ridge 0.07, the dark-background woman's
#: parting 0.11 (taken out at 0.02, the beard source lost a pair's identity: 0.584 -> 0.601).
MIN_SHARE = 0.15


def source_fringe(image: Frame, points: FloatArray) -> FloatArray | None:
    """Soft mask (1 = hair) of a fringe over the forehead of the face with ``points`` in
    ``image``; None when there is none. Worked out on the forehead's box only."""
    shape = (image.shape[0], image.shape[1])
    cheeks = cheek_lab(image, points)
    if cheeks is None:
        return None
    oval = trimmed_oval(points).astype(np.float64)
    _, up = face_axes(points)
    chin = points[mesh.CHIN, :2].astype(np.float64)
    brows = points[np.concatenate([mesh.LEFT_BROW, mesh.RIGHT_BROW]), :2]
    eyes = float(
        np.linalg.norm(points[mesh.LEFT_EYE, :2].mean(0) - points[mesh.RIGHT_EYE, :2].mean(0))
    )
    level = float(((brows - chin) @ up).max()) + BROW_MARGIN * eyes
    above = np.concatenate([oval[(oval - chin) @ up > level], brows])
    pad = 0.2 * eyes + 2.0
    x0, y0 = np.maximum(np.floor(above.min(axis=0) - pad), 0).astype(int)
    x1, y1 = np.ceil(above.max(axis=0) + pad).astype(int)
    x1, y1 = min(int(x1), shape[1]), min(int(y1), shape[0])
    if x1 <= x0 or y1 <= y0:
        return None
    window = np.zeros((y1 - y0, x1 - x0), np.uint8)
    corner = np.array([x0, y0], np.float64)
    cv2.fillPoly(window, [np.round((oval - corner) * 16).astype(np.int32)], (1,), cv2.LINE_8, 4)
    rows = np.arange(y0, y1, dtype=np.float32)[:, None] - np.float32(chin[1])
    cols = np.arange(x0, x1, dtype=np.float32)[None, :] - np.float32(chin[0])
    height = cols * np.float32(up[0]) + rows * np.float32(up[1])
    forehead = (window > 0) & (height > level)
    area = int(forehead.sum())
    crop = np.ascontiguousarray(image[y0:y1, x0:x1])
    lightness = cv2.cvtColor(crop, cv2.COLOR_BGR2Lab)[..., 0]  # uint8: L* scaled to 0-255
    darker = (float(cheeks[0]) - FRINGE_DARKER) * 255.0 / 100.0
    dark = (forehead & (lightness < darker)).astype(np.uint8)
    hair = np.asarray(cv2.morphologyEx(dark, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8)), np.uint8)
    if area == 0 or int(hair.sum()) < MIN_SHARE * area:
        return None
    grow = max(1, round(0.03 * eyes))
    hair = np.asarray(cv2.dilate(hair, np.ones((2 * grow + 1, 2 * grow + 1), np.uint8)), np.uint8)
    # Blurred within the window: its margin (a fifth of the eye distance) holds the blur's
    # reach (3 sigmas, under a tenth), so the mask is the whole crop's blur, for less.
    mask = np.zeros(shape, np.float32)
    mask[y0:y1, x0:x1] = cv2.GaussianBlur(hair.astype(np.float32), (0, 0), max(0.5, eyes / 40))
    return mask
