"""`harness import buildkite FILE --audit`'s text: the audit (importers/audit.py) a section
a question, and FILE on its own."""

from __future__ import annotations

from harness.importers.audit import LIBRARIES, Audit, Gated, platform_of


def render(result: Audit) -> str:
    """The audit as text, a section a question."""
    out = [f"audit of {result.source}: {len(result.step_files)} step files, "
           f"{len(result.gated)} test files gated to a platform"]
    out.append("\ngated to a platform, run by no step on it:")
    out += [f"  {g.platform:5} {_where(g)}"
            + (f" [{', '.join(g.features)}]" if g.features else "")
            + (f" (run on: {', '.join(g.runs_on)})" if g.runs_on else "")
            for g in result.unrun()] or ["  none"]
    out.append("\nCPU test files run on Arm agents only:")
    out += [f"  {_where(g)}" + (f" [{', '.join(g.features)}]" if g.features else "")
            for g in result.arm_only()] or ["  none"]
    out.append("\nsteps commented out:")
    for c in result.commented:
        out.append(f"  {c.file}:{c.line}: {c.label}")
        out += [f"    | {line}" for line in c.text.splitlines()[:12]]
    if not result.commented:
        out.append("  none")
    out.append("\nvLLM's x86 CPU libraries, the agents that reach them, and the lane for each:")
    devices = result.devices()
    for lib, needs, agents, lane in LIBRARIES:
        reached = [d for d in devices if d in agents]
        out.append(f"  {lib:10} {needs}: "
                   + (f"reached by {', '.join(reached)}" if reached else "no agent")
                   + f"; harness lane: {lane}")
    out.append("\nper platform, the gated files its steps run:")
    for name, (ran, total) in result.shares().items():
        share = f"{100 * ran / total:.0f}%" if total else "-"
        out.append(f"  {name:5} {ran} of {total} ({share})")
    if result.focus:
        out += _focus(result)
    if result.unread:
        out.append("\nstep files not read: " + "; ".join(result.unread))
    return "\n".join(out) + "\n"


def _where(g: Gated) -> str:
    return f"{g.file} (gated by {g.via}:{g.line})" if g.via else f"{g.file}:{g.line}"


def _focus(result: Audit) -> list[str]:
    mine = result.focus_steps()
    out = [f"\n{result.focus} on its own: {len(mine)} step(s) that run pytest"]
    for step in mine:
        out.append(f"  {step.label or step.step} ({step.device}, {platform_of(step.device)}): "
                   + (", ".join(step.targets) or "no test file"))
    out.append("test files its steps watch (source_file_dependencies) and none of them runs:")
    watched = result.watched_not_run()
    for file, elsewhere in watched:
        out.append(f"  {file}" + (" (run on the same platform by: " + ", ".join(
            f"{s.file} {s.step} ({s.device})" for s in elsewhere) + ")" if elsewhere
            else " (run on the same platform by no step of the pipeline)"))
    if not watched:
        out.append("  none")
    return out
