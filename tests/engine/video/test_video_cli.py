"""`facegate swap face.jpg clip.mp4 -o out.mp4`: video targets found by content."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner
from videoclips import SOURCE, create_clip

from facegate.cli import main
from facegate.engine.video import probe_video


def test_swap_cli_on_a_video(tmp_path: Path) -> None:
    clip = create_clip(tmp_path / "clip.mp4", seconds=0.5)
    clip = clip.rename(tmp_path / "clip.data")  # no telling suffix: found by content
    out = tmp_path / "out.mp4"
    result = CliRunner().invoke(main, ["swap", str(SOURCE), str(clip), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert probe_video(out).frames == 15
    assert re.search(
        rf"wrote {re.escape(str(out))}: 15 frames \d+x\d+ at [\d.]+ fps", result.stderr
    )
    as_json = CliRunner().invoke(main, ["swap", str(SOURCE), str(clip), "-o", str(out), "--json"])
    assert as_json.stderr == ""  # no progress bar, no summary line: the JSON alone
    summary = json.loads(as_json.stdout)
    assert (summary["output"], summary["frames"]) == (str(out), 15)


def test_swap_cli_refuses_unknown_video_suffix(tmp_path: Path) -> None:
    clip = create_clip(tmp_path / "clip.mp4", seconds=0.2, audio=False)
    result = CliRunner().invoke(
        main, ["swap", str(SOURCE), str(clip), "-o", str(tmp_path / "x.gif")]
    )
    assert result.exit_code == 2
    assert "invalid-options" in result.output
