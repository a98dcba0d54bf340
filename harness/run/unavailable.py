"""``harness run --skip-unavailable``: on a host that is not the matrix's (its device is
absent, or its probe refuses the CPU) the run leaves a folder marked ``skipped`` with the
probe's own line and exits 0, instead of exit 3.

For a nightly lane on a pool of mixed hosts (zen where the CPU has AVX-512 BF16): the
history and the report list the lane as skipped, with why, never as an infrastructure
failure and never as a silent gap.
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import Exit
from harness.results.manifest import InfraFailure
from harness.run.execute import begin_record, open_manifest
from harness.run.request import RunContext
from harness.run.threads import ThreadPlan

SKIPPED_KIND = "unavailable"  # manifest infra_error.kind of a skipped run


def record_skipped(ctx: RunContext, why: str, *, threads: ThreadPlan, run_id: str,
                   run_dir: Path) -> int:
    # The host refused the run before an interpreter was chosen or a suite planned: the
    # record has none, and no suite environment.
    manifest = open_manifest(run_dir, begin_record(ctx, threads=threads, run_id=run_id))
    manifest.finish(status="skipped", exit_code=Exit.OK,
                    infra_error=InfraFailure(kind=SKIPPED_KIND, message=why))
    print(f"harness: skipped (--skip-unavailable): {why}")
    print(f"run folder: {run_dir}")
    return Exit.OK
