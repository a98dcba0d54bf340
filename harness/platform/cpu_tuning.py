"""Host-tuned CPU settings: the variables an agent sets for its own CPU, each naming an
instruction set, a code path or a core type (OpenBLAS's core type, MKL's code path, torch's
capability, oneDNN's ISA, numpy's CPU features, inductor's ``-march``).

They are facts of the agent, not of a lane whose CPU is emulated (platform/cpu_emulation.py):
``OPENBLAS_CORETYPE=Haswell``, set on AMD Zen 5 agents for older OpenBLAS builds, makes
numpy's OpenBLAS run AVX2 code on an emulated x86-64-v2 CPU, which dies of SIGILL on
import. So an emulated CPU's processes inherit none of them: each library then finds the
emulated CPU through CPUID, as on a real one (and the lane's interpreter sets inductor's
``-march`` to the lane's level). A lane that wants one sets it itself (the matrix's
``runtime.env``), and that wins. ``harness run`` says what it left out in its opening lines
and records it in the manifest (``host.agent_env_left_out``).

Standard library only, and :func:`host_tuned` self-contained: the standalone scripts of an
emulated lane carry it by its source (:func:`tuning_source`), the same rule, not a copy.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Mapping

HOST_TUNED = (
    "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",  # OpenBLAS's kernels and blocking (numpy)
    "MKL_DEBUG_CPU_TYPE", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR",  # MKL's code path (torch)
    "ATEN_CPU_CAPABILITY",  # torch's kernels
    "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ONEDNN_CPU_ISA_HINTS", "DNNL_CPU_ISA_HINTS",
    "NPY_ENABLE_CPU_FEATURES", "NPY_DISABLE_CPU_FEATURES",  # numpy's dispatch
    "TORCHINDUCTOR_CPP_MARCH",  # the code inductor compiles
)


def host_tuned(environ: Mapping[str, str], lane: Collection[str] = ()) -> dict[str, str]:
    """The host-tuned CPU settings of ``environ`` an emulated CPU does not inherit, with
    their values: all that are set, but those the lane sets itself (``lane``: names)."""
    return {name: environ[name] for name in HOST_TUNED
            if name in environ and name not in lane}


def tuning_source() -> str:
    """:func:`host_tuned` as a script carries it (a script's annotations are not evaluated:
    it imports ``annotations`` from ``__future__``): the same code, with its table."""
    return f"HOST_TUNED = {HOST_TUNED!r}\n\n\n{inspect.getsource(host_tuned)}"
