"""`facegate swap` on images: success, and one clear line + exit 2 for every bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.testdata import FACES

from facegate.cli import main
from facegate.engine.image import ImageLimits, load_image_file

SOURCE = FACES / "woman_a_selfie_frontal_01.jpg"
TARGET = FACES / "man_frontal_glasses.jpg"


def run(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["swap", *map(str, args)])
    return result.exit_code, result.output


def test_swap_writes_an_image_the_size_of_the_target(tmp_path: Path) -> None:
    out = tmp_path / "swapped.png"
    code, output = run(SOURCE, TARGET, "-o", out, "--blend", "0.8", "--mask", "poisson")
    assert code == 0, output
    written = load_image_file(out, ImageLimits())
    target = load_image_file(TARGET, ImageLimits())
    assert written.format == "png"
    assert written.frame.shape == target.frame.shape
    assert not list(tmp_path.glob(".*.part"))  # written atomically, no leftovers


@pytest.mark.parametrize("no_face", ["no_face_cat.png", "no_face_landscape_mountains.jpg"])
@pytest.mark.parametrize("role", ["source", "target"])
def test_no_face_exits_2_with_the_error_named(tmp_path: Path, no_face: str, role: str) -> None:
    out = tmp_path / "out.jpg"
    source, target = (FACES / no_face, TARGET) if role == "source" else (SOURCE, FACES / no_face)
    code, output = run(source, target, "-o", out)
    assert code == 2
    assert output.startswith("error: no-face-detected: ")
    assert role in output  # says which image has no face
    assert len(output.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize(
    ("content", "error"),
    [(b"", "unsupported-media"), (b"GIF89a" + b"\0" * 64, "unsupported-media")],
)
def test_bad_input_exits_2(tmp_path: Path, content: bytes, error: str) -> None:
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(content)
    code, output = run(bad, TARGET, "-o", tmp_path / "out.jpg")
    assert code == 2
    assert output.startswith(f"error: {error}: ")


def test_truncated_target_is_corrupt_media(tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.jpg"
    truncated.write_bytes(TARGET.read_bytes()[:5000])
    code, output = run(SOURCE, truncated, "-o", tmp_path / "out.jpg")
    assert code == 2
    assert output.startswith("error: corrupt-media: ")


def test_missing_file_and_bad_options_are_usage_errors(tmp_path: Path) -> None:
    code, output = run(tmp_path / "missing.jpg", TARGET, "-o", tmp_path / "out.jpg")
    assert code == 2
    assert "missing.jpg" in output
    code, output = run(SOURCE, TARGET, "-o", tmp_path / "out.gif")
    assert code == 2
    assert "unknown output suffix" in output
    code, output = run(SOURCE, TARGET, "-o", tmp_path / "out.jpg", "--map", "0-1")
    assert code == 2
    assert "SOURCE:TARGET" in output


def test_success_prints_one_line_quiet_none_json_an_object(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "out.jpg"
    said = runner.invoke(main, ["swap", str(SOURCE), str(TARGET), "-o", str(out)])
    assert said.exit_code == 0, said.output
    assert said.stdout == ""
    assert re.fullmatch(
        rf"wrote {re.escape(str(out))}: 1 of 1 faces swapped in \d+\.\d s\n", said.stderr
    )
    quiet = runner.invoke(main, ["swap", str(SOURCE), str(TARGET), "-o", str(out), "-q"])
    assert quiet.exit_code == 0
    assert quiet.output == ""
    as_json = runner.invoke(main, ["swap", str(SOURCE), str(TARGET), "-o", str(out), "--json"])
    assert as_json.stderr == ""
    summary = json.loads(as_json.stdout)
    assert summary["output"] == str(out)
    assert (summary["target_faces"], summary["processed"]) == (1, 1)
    assert summary["seconds"] > 0


def test_reference_selector_names_the_reference_flag(tmp_path: Path) -> None:
    code, output = run(SOURCE, TARGET, "-o", tmp_path / "out.jpg", "--selector", "reference")
    assert code == 2
    assert "--selector reference needs --reference FILE" in output


def test_mapping_out_of_range_is_invalid_options(tmp_path: Path) -> None:
    code, output = run(SOURCE, TARGET, "-o", tmp_path / "out.jpg", "--map", "0:5")
    assert code == 2
    assert output.startswith("error: invalid-options: ")
