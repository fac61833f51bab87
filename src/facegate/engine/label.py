"""A visible label drawn into a frame ("AI-generated", in a corner): the disclosure a tenant
may turn on for its results (EU AI Act Art. 50(4)). White text on a dark translucent box,
sized to the frame's height, so it stays legible at any resolution."""

from __future__ import annotations

from typing import Literal

import cv2
import numpy as np

from facegate.engine.types import Frame

Corner = Literal["top-left", "top-right", "bottom-left", "bottom-right"]
_FONT = cv2.FONT_HERSHEY_SIMPLEX


def draw_label(frame: Frame, text: str, corner: Corner = "bottom-right") -> Frame:
    """A copy of ``frame`` with ``text`` in ``corner``."""
    height, width = frame.shape[:2]
    scale = max(0.35, min(height, width) / 900)
    thickness = max(1, round(scale * 2))
    (text_w, text_h), baseline = cv2.getTextSize(text, _FONT, scale, thickness)
    pad = max(3, round(text_h * 0.4))
    box_w, box_h = min(width, text_w + 2 * pad), min(height, text_h + baseline + 2 * pad)
    margin = max(2, round(min(height, width) * 0.015))
    left = margin if corner.endswith("left") else max(0, width - box_w - margin)
    top = margin if corner.startswith("top") else max(0, height - box_h - margin)
    out = frame.copy()
    region = out[top : top + box_h, left : left + box_w]
    region[:] = (region.astype(np.float32) * 0.35).astype(np.uint8)  # darken behind the text
    origin = (left + pad, top + pad + text_h)
    cv2.putText(out, text, origin, _FONT, scale, (255, 255, 255), thickness, cv2.LINE_AA)
    return out
