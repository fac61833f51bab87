"""Topology of mediapipe's 478-point face mesh, derived once at import from the connection sets
shipped in mediapipe 0.10.21 (no geometry file is needed; the wheel carries none).

Everything here is an immutable (read-only) numpy array of landmark indices:

- ``TRIANGLES`` (852, 3) int32: the mesh faces. The 3-cliques of ``FACEMESH_TESSELATION`` give
  854 candidates; (49, 64, 129) and (279, 294, 358) are cliques but not faces (they overlap
  real triangles), so they are dropped. Each row is ordered so that on an upright frontal face
  (x right, y down, pixels) ``cross(b - a, c - a) > 0``: a triangle whose signed area turns
  negative in a frame is facing away (turned head) — useful to find hidden triangles.
- Region contours as closed polygons in walking order (usable with ``cv2.fillPoly``):
  ``LEFT_EYE``/``RIGHT_EYE`` (16), ``LIPS_OUTER``/``LIPS_INNER`` (20), ``FACE_OVAL`` (36),
  ``LEFT_BROW``/``RIGHT_BROW`` (10: lower edge then upper edge back), ``LEFT_IRIS``/``RIGHT_IRIS``
  (4, centres ``LEFT_IRIS_CENTER``/``RIGHT_IRIS_CENTER``). Left/right are the *subject's*, as in
  mediapipe: the subject's right eye appears on the image left of an upright frontal face.
- ``MIRROR`` (478,) int32: index of the left-right mirrored landmark, an involution (checked at
  import; midline points map to themselves). The tessellation is *almost* symmetric — around
  the eye corners (33/246 vs 263/466) its triangles differ — so a purely combinatorial mirror
  fails there. Instead the mesh graph is laid out flat (Tutte embedding with the face oval
  pinned on a circle), which is symmetric up to those small local differences, and each point
  is matched to the reflection of its partner by an optimal assignment (largest residual 0.03
  of the layout's radius). The 10 iris points are paired by their documented order. The
  assignment's result is kept as a table (``_MIRROR_TABLE``): solving it needs scipy, whose
  import cost a third of a second of every command's start;
  ``tests/engine/test_mesh.py`` solves it again and compares.
- ``MIRROR_PAIRS`` (225, 2) int32: (subject's right, subject's left) for every point off the
  midline; ``MIDLINE`` (28,) the points on it.
- ``NOSE_TIP``, ``MOUTH_RIGHT``/``MOUTH_LEFT``, ``FOREHEAD_TOP``/``CHIN``: single landmarks.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from facegate.engine.mediapipe_import import solutions
from facegate.engine.types import frozen

IndexArray = npt.NDArray[np.int32]
_conn = solutions.face_mesh_connections

N_LANDMARKS = 478
_NOT_FACES = frozenset({(49, 64, 129), (279, 294, 358)})
NOSE_TIP = 1
# Mouth corners: the subject's right corner (image left when upright) and left corner.
MOUTH_RIGHT = 61
MOUTH_LEFT = 291
# Midline from the top of the forehead to the chin, used for the vertical axis of the pose.
FOREHEAD_TOP = 10
CHIN = 152
_RIGHT_EYE_OUTER = 33


def _frozen(values: Iterable[int] | npt.ArrayLike) -> IndexArray:
    return frozen(np.array(values, dtype=np.int32))


def _cliques(edges: Iterable[tuple[int, int]]) -> list[tuple[int, int, int]]:
    neighbours: dict[int, set[int]] = {}
    for a, b in edges:
        neighbours.setdefault(a, set()).add(b)
        neighbours.setdefault(b, set()).add(a)
    found = set()
    for a, near in neighbours.items():
        for b in near:
            if b <= a:
                continue
            for c in near & neighbours[b]:
                if c > b:
                    found.add((a, b, c))
    return sorted(found - _NOT_FACES)


def _layout(edges: Iterable[tuple[int, int]], oval: list[int]) -> npt.NDArray[np.float64]:
    """Tutte embedding of the mesh graph: the face oval pinned on a circle (forehead top, then
    evenly round), every inner point at the mean of its neighbours. The mesh is symmetric, so
    this flat layout is too, in the image's axes (x right, y down, subject's right eye left)."""
    n = N_LANDMARKS - 10  # the 10 iris points are not in the tessellation
    adjacency = np.zeros((n, n))
    for a, b in edges:
        adjacency[a, b] = adjacency[b, a] = 1.0
    start = oval.index(FOREHEAD_TOP)
    oval = oval[start:] + oval[:start]
    angles = np.arange(len(oval)) / len(oval) * 2.0 * np.pi
    layout = np.zeros((n, 2))
    layout[oval, 0], layout[oval, 1] = np.sin(angles), -np.cos(angles)
    pinned = np.zeros(n, dtype=bool)
    pinned[oval] = True
    laplacian = np.diag(adjacency.sum(axis=1)) - adjacency
    free = ~pinned
    layout[free] = np.linalg.solve(
        laplacian[np.ix_(free, free)], -laplacian[np.ix_(free, pinned)] @ layout[pinned]
    )
    if layout[_RIGHT_EYE_OUTER, 0] > 0:  # walked the oval the other way round: un-mirror
        layout[:, 0] *= -1.0
    return layout


def _orient(
    triangles: list[tuple[int, int, int]], layout: npt.NDArray[np.float64]
) -> list[tuple[int, int, int]]:
    """Order each triangle so its signed area is positive in image axes on a frontal face."""
    oriented = []
    for a, b, c in triangles:
        (ax, ay), (bx, by), (cx, cy) = layout[a], layout[b], layout[c]
        cross = (bx - ax) * (cy - ay) - (by - ay) * (cx - ax)
        oriented.append((a, b, c) if cross > 0 else (a, c, b))
    return oriented


#: The optimal assignment of each of the 468 mesh points to the reflection of its partner in
#: the flat layout (``tests/engine/test_mesh.py`` recomputes it with scipy's
#: ``linear_sum_assignment`` on ``_LAYOUT`` and compares).
_MIRROR_TABLE = """
0 1 2 248 4 5 6 249 8 9 10 11 12 13 14 15 16 17 18 19 250 251 252 253 254 255 256 257 258
259 260 261 262 263 264 265 266 267 268 269 270 271 272 273 274 275 276 277 278 279 280 281
282 283 284 285 286 287 288 289 290 291 292 293 294 295 296 297 298 299 300 301 302 303 304
305 306 307 308 309 310 311 312 313 314 315 316 317 318 319 320 321 322 323 94 324 325 326
327 328 329 330 331 332 333 334 335 336 337 338 339 340 341 342 343 344 345 346 347 348 349
350 351 352 353 354 355 356 357 358 359 360 361 362 363 364 365 366 367 368 369 370 371 372
373 374 375 376 377 378 379 151 152 380 381 382 383 384 385 386 387 388 389 390 164 391 392
393 168 394 395 396 397 398 399 175 400 401 402 403 404 405 406 407 408 409 410 411 412 413
414 415 416 417 418 195 419 197 420 199 200 421 422 423 424 425 426 427 428 429 430 431 432
433 434 435 436 437 438 439 440 441 442 443 444 445 446 447 448 449 450 451 452 453 454 455
456 457 458 459 460 461 462 463 464 465 466 467 3 7 20 21 22 23 24 25 26 27 28 29 30 31 32
33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 95
96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119
120 121 122 123 124 125 126 127 128 129 130 131 132 133 134 135 136 137 138 139 140 141 142
143 144 145 146 147 148 149 150 153 154 155 156 157 158 159 160 161 162 163 165 166 167 169
170 171 172 173 174 176 177 178 179 180 181 182 183 184 185 186 187 188 189 190 191 192 193
194 196 198 201 202 203 204 205 206 207 208 209 210 211 212 213 214 215 216 217 218 219 220
221 222 223 224 225 226 227 228 229 230 231 232 233 234 235 236 237 238 239 240 241 242 243
244 245 246 247
"""


def _mirror(layout: npt.NDArray[np.float64]) -> npt.NDArray[np.int32]:
    partner = np.array(_MIRROR_TABLE.split(), dtype=np.int32)
    if len(partner) != len(layout):
        raise RuntimeError("face mesh mirror table does not match the tessellation")
    mirror = np.arange(N_LANDMARKS, dtype=np.int32)
    mirror[: len(partner)] = partner
    # The iris points are not in the tessellation: centre 468 <-> 473; the 4 ring points are
    # listed in the same image order (outer-side, top, inner-side, bottom) for both eyes.
    for right, left in ((468, 473), (469, 476), (470, 475), (471, 474), (472, 477)):
        mirror[right], mirror[left] = left, right
    if not np.array_equal(mirror[mirror], np.arange(N_LANDMARKS)):
        raise RuntimeError("face mesh mirror map is not an involution")
    return mirror


def _loop(edges: Iterable[tuple[int, int]]) -> list[list[int]]:
    """Split an undirected edge set into its chains/cycles, each in walking order."""
    neighbours: dict[int, list[int]] = {}
    for a, b in edges:
        neighbours.setdefault(a, []).append(b)
        neighbours.setdefault(b, []).append(a)
    chains, visited = [], set()
    # Start chains at their ends (degree 1) so open paths come out whole; then the cycles.
    starts = sorted(n for n in neighbours if len(neighbours[n]) == 1) + sorted(neighbours)
    for start in starts:
        if start in visited:
            continue
        chain, previous, current = [start], -1, start
        visited.add(start)
        while True:
            step = [n for n in sorted(neighbours[current]) if n != previous and n not in visited]
            if not step:
                break
            previous, current = current, step[0]
            visited.add(current)
            chain.append(current)
        chains.append(chain)
    return chains


def _brow(edges: Iterable[tuple[int, int]], lower_outer: int, upper_outer: int) -> IndexArray:
    chains = _loop(edges)
    lower = next(chain for chain in chains if lower_outer in chain)
    upper = next(chain for chain in chains if upper_outer in chain)
    if lower[0] != lower_outer:
        lower.reverse()
    if upper[0] != upper_outer:
        upper.reverse()
    # Close the polygon: outwards-in along the lower edge, then back out along the upper edge.
    return _frozen(lower + upper[::-1])


def _lips() -> tuple[IndexArray, IndexArray]:
    loops = _loop(_conn.FACEMESH_LIPS)
    outer = next(loop for loop in loops if 61 in loop)
    inner = next(loop for loop in loops if 78 in loop)
    return _frozen(outer), _frozen(inner)


FACE_OVAL: IndexArray = _frozen(_loop(_conn.FACEMESH_FACE_OVAL)[0])
_LAYOUT = frozen(_layout(_conn.FACEMESH_TESSELATION, [int(i) for i in FACE_OVAL]))
TRIANGLES: IndexArray = _frozen(_orient(_cliques(_conn.FACEMESH_TESSELATION), _LAYOUT))
MIRROR: IndexArray = _frozen(_mirror(_LAYOUT))

_SIDE = _frozen(np.flatnonzero(MIRROR != np.arange(N_LANDMARKS)))
_SUBJECT_RIGHT = tuple(int(i) for i in _SIDE if i < len(_LAYOUT) and _LAYOUT[i, 0] < 0)
MIRROR_PAIRS: IndexArray = _frozen(
    [(i, int(MIRROR[i])) for i in _SUBJECT_RIGHT]
    + [(468, 473), (469, 476), (470, 475), (471, 474), (472, 477)]
)
MIDLINE: IndexArray = _frozen(np.flatnonzero(MIRROR == np.arange(N_LANDMARKS)))

LEFT_EYE: IndexArray = _frozen(_loop(_conn.FACEMESH_LEFT_EYE)[0])
RIGHT_EYE: IndexArray = _frozen(_loop(_conn.FACEMESH_RIGHT_EYE)[0])
LIPS_OUTER, LIPS_INNER = _lips()
LEFT_BROW: IndexArray = _brow(_conn.FACEMESH_LEFT_EYEBROW, lower_outer=276, upper_outer=300)
RIGHT_BROW: IndexArray = _brow(_conn.FACEMESH_RIGHT_EYEBROW, lower_outer=46, upper_outer=70)
LEFT_IRIS: IndexArray = _frozen(_loop(_conn.FACEMESH_LEFT_IRIS)[0])
RIGHT_IRIS: IndexArray = _frozen(_loop(_conn.FACEMESH_RIGHT_IRIS)[0])
#: The nose: bridge, tip, alae and columella (mediapipe's FACEMESH_NOSE contour points).
NOSE: IndexArray = _frozen(sorted({i for edge in _conn.FACEMESH_NOSE for i in edge}))
LEFT_IRIS_CENTER = 473
RIGHT_IRIS_CENTER = 468
