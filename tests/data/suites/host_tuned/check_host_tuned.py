"""A lane with an emulated CPU inherits none of the agent's host-tuned CPU settings
(harness/platform/cpu_tuning.py): numpy's OpenBLAS multiplies on the lane's CPU (with the
agent's OPENBLAS_CORETYPE=Haswell it runs AVX2 code on an emulated x86-64-v2 and dies of
SIGILL), and each such setting the process sees is the lane's own: the matrix's
``runtime.env``, and inductor's ``-march`` at the lane's level, which its interpreter sets."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from harness.platform.cpu_tuning import HOST_TUNED


def test_numpy_multiplies_on_the_lane_cpu() -> None:
    a = np.arange(48 * 48, dtype=np.float64).reshape(48, 48) / 2304.0
    rows = a.tolist()
    want = [[sum(x * y for x, y in zip(r, s, strict=True)) for s in rows] for r in rows]
    assert np.allclose(a @ a.T, np.array(want), rtol=1e-12, atol=0.0)


def test_each_host_tuned_setting_is_the_lanes(platform: Any) -> None:
    matrix = platform.matrix
    lane = {k: v for k, v in matrix.runtime.env.items() if k in HOST_TUNED}
    lane.setdefault("TORCHINDUCTOR_CPP_MARCH", matrix.cpu.emulated)
    seen = {k: os.environ[k] for k in HOST_TUNED if k in os.environ}
    assert seen == lane
