"""Build hook: ship the matrices, suites, images and CI templates inside the wheel.

They live at the top of the checkout (where a developer edits them); a wheel installs
only packages, so ``build_py`` copies them to ``harness/_shipped/`` in the build, where
``harness.roots.shipped_root`` finds them. An editable install reads the checkout.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("matrices", "suites", "images", "ci/templates")
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "downloads")


class BuildPyWithShipped(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        here = Path(__file__).resolve().parent
        target = Path(self.build_lib) / "harness" / "_shipped"
        shutil.rmtree(target, ignore_errors=True)  # a reused build/ keeps no deleted file
        for rel in SHIPPED:
            source = here / rel
            if source.is_dir():
                shutil.copytree(source, target / rel, ignore=SKIP, dirs_exist_ok=True)


setup(cmdclass={"build_py": BuildPyWithShipped})
