"""Reference selection accuracy: person A found among others, no stranger accepted.

    .venv/bin/python benchmarks/selection_quality.py

Scenes from ../shared/data/faces: each photo of person A (``woman_a_*``) set beside each group
photo (one image, person A among 2-8 others), plus every other photo alone (strangers only).
Each photo of person A in turn is the reference (selector mode ``reference``, face 0). Per
descriptor, in the same run: the geometric one (``engine.descriptor``, threshold 0.018, what
selection used before issue 16) and the recogniser's (``engine.identity``, 0.6), attached the
way the pipeline attaches it in reference mode. Printed: person-A faces matched of those
present, stranger faces accepted of those present.
"""

from __future__ import annotations

import argparse
import copy
from dataclasses import dataclass

import numpy as np

from benchkit import FACES, read_frame, read_frames
from facegate.engine.faces import FaceAnalyser
from facegate.engine.identity import IdentityDescriber
from facegate.engine.selection import SelectorSpec, select_faces
from facegate.engine.types import Face, Frame


@dataclass
class Scene:
    name: str
    frame: Frame
    faces: list[Face]
    person_a_right_of: float  # x below which a face is person A (0: none present)


def beside(left: Frame, right: Frame) -> Frame:
    """``left`` and ``right`` side by side on one black canvas (top-aligned)."""
    height = max(left.shape[0], right.shape[0])
    canvas = np.zeros((height, left.shape[1] + right.shape[1], 3), np.uint8)
    canvas[: left.shape[0], : left.shape[1]] = left
    canvas[: right.shape[0], left.shape[1] :] = right
    return canvas


def scenes(analyser: FaceAnalyser, person_a: list[str]) -> list[Scene]:
    frames = read_frames(FACES)
    groups = [n for n in frames if n.startswith("group_")]
    found = []
    for a in person_a:
        for group in groups:
            frame = beside(frames[a], frames[group])
            found.append(
                Scene(f"{a} + {group}", frame, analyser.analyse(frame), frames[a].shape[1])
            )
    for name in frames:
        if name not in person_a:
            found.append(Scene(name, frames[name], analyser.analyse(frames[name]), 0.0))
    return found


def is_person_a(face: Face, scene: Scene) -> bool:
    return float(face.box[2]) <= scene.person_a_right_of


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    analyser = FaceAnalyser()
    identity = IdentityDescriber()
    person_a = sorted(p.name for p in FACES.iterdir() if p.name.startswith("woman_a_"))
    all_scenes = scenes(analyser, person_a)
    spec = SelectorSpec(mode="reference")
    print(f"{len(all_scenes)} scenes, {sum(len(s.faces) for s in all_scenes)} faces")
    for learned in (False, True):
        label = "recogniser (dlib ResNet, 0.6)" if learned else "geometric (0.018)"
        matched = present = accepted = strangers = 0
        misses: list[str] = []
        for reference_name in person_a:
            reference_frame = read_frame(FACES / reference_name)
            references = analyser.analyse(reference_frame)
            if learned:
                identity.attach(reference_frame, references)
            for scene in all_scenes:
                if scene.name.startswith(reference_name):
                    continue  # the reference photo itself
                faces = copy.deepcopy(scene.faces)
                if learned:
                    identity.attach(scene.frame, faces)
                chosen = {id(face) for _, face in select_faces([], faces, spec, references)}
                for face in faces:
                    if is_person_a(face, scene):
                        present += 1
                        matched += id(face) in chosen
                        if id(face) not in chosen:
                            misses.append(f"{reference_name} -> {scene.name}")
                    else:
                        strangers += 1
                        accepted += id(face) in chosen
        print(
            f"{label:32} person A matched {matched}/{present} "
            f"({100 * matched / max(present, 1):.1f} %), strangers accepted "
            f"{accepted}/{strangers}"
        )
        for miss in sorted(set(misses))[:6]:
            print(f"    missed: {miss}")


if __name__ == "__main__":
    main()
