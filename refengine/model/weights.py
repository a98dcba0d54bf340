"""Weights from a fixed seed (no download): how every refengine model and block draws them.

A weight matrix is drawn from N(0, 1) and scaled by 1/sqrt(fan_in) (its last dimension),
a norm weight near 1 (1 + 0.1 N(0, 1)). Tensors are drawn in call order from one
generator, so a model's weights depend on its seed and on the order it asks for them.
"""

from __future__ import annotations

import torch
from torch import nn


class SeededWeights:
    """Draws a model's tensors in ``dtype``, in call order, from a generator seeded ``seed``.

    ``stored`` (default ``dtype``): the dtype each tensor is rounded to before it is cast to
    ``dtype``. A float32 model with ``stored=torch.bfloat16`` holds a bfloat16 model's
    parameters exactly, so comparing the two compares the arithmetic alone."""

    def __init__(self, seed: int, dtype: torch.dtype, stored: torch.dtype | None = None) -> None:
        self.gen = torch.Generator().manual_seed(seed)
        self.dtype, self.stored = dtype, stored or dtype

    def fp32(self, *shape: int, scale: float | None = None) -> torch.Tensor:
        """Float32, not rounded: scaled by ``scale`` (default 1/sqrt(shape[-1]))."""
        s = shape[-1] ** -0.5 if scale is None else scale
        return torch.randn(*shape, generator=self.gen) * s

    def cast(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` rounded to the stored dtype, in the model's dtype."""
        return t.to(self.stored).to(self.dtype)

    def weight(self, *shape: int, scale: float | None = None) -> torch.Tensor:
        return self.cast(self.fp32(*shape, scale=scale))

    def norm(self, n: int) -> torch.Tensor:
        return self.cast(1.0 + 0.1 * torch.randn(n, generator=self.gen))


def frozen(t: torch.Tensor) -> nn.Parameter:
    """A module's weight: a parameter no optimiser or autograd ever touches."""
    return nn.Parameter(t.contiguous(), requires_grad=False)
