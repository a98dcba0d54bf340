"""``harness run --skip-unavailable``: on a host that is not the matrix's (its device is
absent, or its probe refuses the CPU) the run leaves a folder marked ``skipped`` with the
probe's own line and exits 0, instead of exit 3.

For a nightly lane on a pool of mixed hosts (zen where the CPU has AVX-512 BF16): the
history and the report list the lane as skipped, with why, never as an infrastructure
failure and never as a silent gap.
"""

from __future__ import annotations

from harness.results.manifest import InfraFailure
from harness.run.execute import start_manifest
from harness.run.prepare import plan_threads_step, prepare_run_dir
from harness.run.request import RunContext

SKIPPED_KIND = "unavailable"  # manifest infra_error.kind of a skipped run


def record_skipped(ctx: RunContext, why: str) -> int:
    plan_threads_step(ctx)
    prepare_run_dir(ctx)
    start_manifest(ctx)
    assert ctx.manifest is not None
    ctx.manifest.finish(status="skipped", exit_code=0,
                        infra_error=InfraFailure(kind=SKIPPED_KIND, message=why))
    print(f"harness: skipped (--skip-unavailable): {why}")
    print(f"run folder: {ctx.run_dir}")
    return 0
