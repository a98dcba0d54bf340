"""Whether refengine can load on this torch at all (only torch is imported here).

refengine registers its ops with ``torch.library.custom_op`` (torch >= 2.4). Where torch
is older (Debian's 1.13 on s390x), the parity modules cannot even be imported; the suite
then collects only test_engine_loads.py, which skips with this reason instead of the run
ending in import errors.
"""

from __future__ import annotations

import torch

MIN_TORCH = (2, 4)


def torch_version() -> tuple[int, int]:
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def too_old() -> str | None:
    """Why refengine cannot load here, or None when it can."""
    if torch_version() < MIN_TORCH:
        return (f"refengine registers its ops with torch.library.custom_op (torch >= "
                f"{MIN_TORCH[0]}.{MIN_TORCH[1]}); this is torch {torch.__version__}")
    return None
