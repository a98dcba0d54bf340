"""Bring your own suite's standalone script: a user's suite outside the checkout, under a
user matrix that extends the shipped ``cpu`` one, offers ``harness repro --standalone``
through its own ``harness_suite.py`` (docs/byo-suite.md, "A suite's hooks"), as the shipped
kernel_parity and vllm_engine suites do: harness runs the script its hook writes, sees the
finding's signature, writes it; the script runs with plain python (no harness), exits 1
while the engine's bug is there and 0 once the source is fixed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(600)

BUGGY = "    return x.flip(0).cumsum(0).flip(0)\n"  # the engine's bug: a reversed sum
FIXED = "    return x.cumsum(0)\n"

ENGINE = '''
import torch


def my_cumsum(x):
    """The engine's running sum (torch only)."""
''' + BUGGY

TEST = '''
import torch

from mylib import my_cumsum


def test_cumsum():
    x = torch.arange(1.0, 9.0)
    assert torch.equal(my_cumsum(x), torch.cumsum(x, 0))
'''

# The user's hooks: the script holds the engine's own my_cumsum, taken from mylib.py by ast
# (harness's library for hooks), and the expected signature harness passes in.
HOOKS = '''
import ast
import json
from pathlib import Path

from harness.repro.standalone_ops import definitions, import_lines

SCRIPT = """#!/usr/bin/env python3
# Standalone repro of TEST_ID (made by harness repro --standalone from ORIGIN)
import json
import sys

IMPORTS

EXPECTED = json.loads(EXPECTED_JSON)


CODE


def main():
    x = torch.arange(1.0, 9.0)
    got, want = my_cumsum(x), torch.cumsum(x, 0)
    err = float((got - want).abs().max())
    seen = {"kind": ""}
    if err > 0:
        seen = {"kind": "mismatch", "max_abs_err": err,
                "max_rel_err": err / float(want.abs().max()), "headroom": err / 1e-6}
    if "--json" in sys.argv:
        print("SIGNATURE " + json.dumps(seen))
    if not seen["kind"]:
        print("passes: my_cumsum matches torch.cumsum")
        return 0
    print(f"seen: mismatch: max abs err {err:.4g}")
    if seen["kind"] == EXPECTED.get("kind"):
        print("the finding is there")
        return 1
    return 2


sys.exit(main())
"""


def standalone(test_id, request):
    if not test_id.endswith("test_sums.py::test_cumsum"):
        return None
    source = (Path(__file__).resolve().parent / "mylib.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    text = (SCRIPT.replace("TEST_ID", test_id).replace("ORIGIN", request.origin)
            .replace("IMPORTS", "\\n".join(import_lines(tree, source, ("__future__",))))
            .replace("EXPECTED_JSON", repr(json.dumps(request.expected)))
            .replace("CODE", "\\n\\n".join(definitions(tree, source, ("my_cumsum",)))))
    return {"text": text, "timeout_s": 120,
            "unshrinkable": "my suite's case has no sizes to shrink"}
'''

USER_MATRIX = """
extends: cpu
description: my engine's sums on the host CPU
suites:
  mine:
    path: ../sums                   # relative to this file
    workers: 1
    timeout_s: 600
"""
TEST_ID = "test_sums.py::test_cumsum"


def harness(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=500, check=False)


def plain_python(script: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HARNESS_ROOT")}
    return subprocess.run([sys.executable, "-I", str(script)], cwd=script.parent, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_users_suite_offers_its_own_standalone_script(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    sums = tmp_path / "sums"
    sums.mkdir()
    (sums / "mylib.py").write_text(ENGINE)
    (sums / "test_sums.py").write_text(TEST)
    (sums / "harness_suite.py").write_text(HOOKS)
    (tmp_path / "user").mkdir()
    matrix = tmp_path / "user" / "mysums.yaml"
    matrix.write_text(USER_MATRIX)
    script = tmp_path / "out" / "repro.py"
    script.parent.mkdir()
    ask = ("repro", "--matrix", str(matrix), "--test", TEST_ID, "--python", "current",
           "--standalone", str(script))

    made = harness(*ask, cwd=tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    assert "seen here: mismatch: max abs err 35" in made.stdout, made.stdout
    text = script.read_text(encoding="utf-8")
    assert "import harness" not in text and "from harness" not in text
    assert text.count(BUGGY.rstrip()) == 1  # the engine's own code, as written
    assert '"kind": "mismatch"' in text  # the signature seen, written in as expected

    found = plain_python(script)
    assert found.returncode == 1, found.stdout + found.stderr
    assert "the finding is there" in found.stdout
    script.write_text(text.replace(BUGGY.rstrip(), FIXED.rstrip()), encoding="utf-8")
    gone = plain_python(script)
    assert gone.returncode == 0 and "passes" in gone.stdout, gone.stdout + gone.stderr

    # with the engine fixed there is nothing to reproduce: one line, exit 1, nothing written
    (sums / "mylib.py").write_text(ENGINE.replace(BUGGY, FIXED))
    script.unlink()
    again = harness(*ask, cwd=tmp_path)
    assert again.returncode == 1 and "passes here" in again.stderr, again.stderr
    assert not script.exists()
    # the hook names no sizes: --minimize is refused with its reason
    refused = harness(*ask, "--minimize", cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert "--minimize: my suite's case has no sizes to shrink" in refused.stderr
