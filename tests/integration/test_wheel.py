"""A wheel carries what an install outside a checkout needs (the clean-room CI step runs it)."""

import subprocess
import sys
import zipfile
from pathlib import Path

from harness.roots import SHIPPED, shipped_root

ROOT = shipped_root()


def test_wheel_ships_matrices_suites_images_templates(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, check=False, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = tmp_path.glob("harness-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for rel in SHIPPED:
        expected = {p.relative_to(ROOT).as_posix() for p in (ROOT / rel).rglob("*")
                    if p.is_file() and "__pycache__" not in p.parts
                    and "downloads" not in p.parts and p.suffix != ".pyc"}
        assert expected, rel
        missing = sorted(e for e in expected if f"harness/_shipped/{e}" not in names)
        assert not missing, missing
    assert "refengine/data/refengine_bpe.tiktoken" in names
    assert any(n.startswith("harness/reports/templates/") for n in names)
    assert not any(n.startswith(("reports/", "harness/_shipped/reports")) for n in names)
