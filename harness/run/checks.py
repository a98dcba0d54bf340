"""Steps of ``harness run`` that keep nothing silent: files a run left in the checkout,
and known_failures entries that matched no test of a suite collected in full."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.platform.gitinfo import untracked_files
from harness.results.manifest import UnmatchedKnownFailure
from harness.run.plan import select_suites
from harness.run.unmatched import unmatched_known_failures

if TYPE_CHECKING:
    from harness.run.request import RunContext, Started


def snapshot_checkout(ctx: RunContext) -> frozenset[str] | None:
    """The checkout's untracked files before any suite runs (None: not a git checkout)."""
    return untracked_files(ctx.root)


def record_new_files(run: Started) -> None:
    """Files the suites left in the checkout (untracked, not ignored): one line and the
    manifest's ``new_files``, since the manifest's ``git.dirty`` was taken before the run."""
    after = untracked_files(run.ctx.root)
    if run.untracked_before is None or after is None:
        return
    new = sorted(after - run.untracked_before)
    run.manifest.set_new_files(new)
    if new:
        shown = ", ".join(new[:5]) + (f" and {len(new) - 5} more" if len(new) > 5 else "")
        print(f"harness: the run left {len(new)} new file(s) in the checkout: {shown}")


# pytest arguments that run only some of the collected tests.
_SELECTING = ("-k", "-m", "-x", "--exitfirst", "--maxfail", "--deselect", "--lf", "--last-failed")


def _selects(args: tuple[str, ...]) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in args for flag in _SELECTING)


def fully_collected(run: Started) -> set[str]:
    """Suites whose every test was selected: no -k, -m, shard, smoke tier or node ids."""
    ctx = run.ctx
    if ctx.request.keyword or ctx.request.shard or _selects(ctx.request.pytest_args):
        return set()
    done = {o.suite for o in run.outcomes if not o.status.unfinished}
    return {
        s.name
        for s in select_suites(ctx.matrix, ctx.request.suites)
        if s.name in done
        and not (s.k or s.markers or _selects(s.pytest_args) or s.tier != "full")
        and not ctx.request.tests.get(s.name)
    }


def report_unmatched(run: Started) -> None:
    host = run.manifest.record.host
    found = unmatched_known_failures(
        run.ctx.matrix, run.plan.invocations, emulate=run.ctx.request.emulate,
        full=fully_collected(run), cpu_flags=frozenset(host.cpu_flags if host else ())
    )
    run.manifest.set_unmatched_known_failures([
        UnmatchedKnownFailure(suite=u.suite, rootdir=u.rootdir, id=u.id, where=u.where)
        for u in found
    ])
    if found:
        print("harness: known_failures entries that matched no test (ids are relative to rootdir):")
    for u in found:
        print(f"harness:   {u.suite} (rootdir {u.rootdir}): {u.id} [{u.where}]")
