"""Fusion passes over FX graphs of refengine ops, and a torch.compile backend applying them.

from refengine.fusion import FusionBackend
backend = FusionBackend(fp8_dtype=torch.float8_e4m3fn)
compiled = torch.compile(model, backend=backend)
compiled(x); backend.report  # matched count per pass, ops left unfused, kernels
"""

from refengine.fusion.backend import FusionBackend, FusionReport, PassResult
from refengine.fusion.passes import PASS_NAMES

__all__ = ["PASS_NAMES", "FusionBackend", "FusionReport", "PassResult"]
