"""``harness run --docker --update-expectations`` mounts the checkout read-write (the
suites rewrite their per-platform golden and expectation files there); every other run
mounts it read-only."""

from __future__ import annotations

import subprocess
import sys

from harness.matrix import load_matrix
from harness.roots import project_root
from harness.runners.docker_spec import build_spec, cli_args

ROOT = project_root().resolve()


def _checkout_mount(writable: bool) -> str:
    spec = build_spec(load_matrix("s390x", ROOT), ROOT, ROOT / "reports" / "x", cache_root=ROOT,
                      writable_checkout=writable)
    argv = cli_args(spec, {})
    mounts = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-v"]
    return next(m for m in mounts if m.split(":")[0] == str(ROOT))


def test_checkout_is_read_only_unless_updating() -> None:
    assert _checkout_mount(False) == f"{ROOT}:{ROOT}:ro"
    assert _checkout_mount(True) == f"{ROOT}:{ROOT}"


def test_dry_run_shows_the_writable_mount(tmp_path: object) -> None:
    def dry(*extra: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "harness", "run", "--matrix", "s390x", "--docker",
             "--dry-run", "--suite", "e2e", "--reports", str(tmp_path), *extra],
            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    assert f"{ROOT}:{ROOT}:ro" in dry()
    updating = dry("--update-expectations")
    assert f"{ROOT}:{ROOT}:ro" not in updating and f"{ROOT}:{ROOT} " in updating
