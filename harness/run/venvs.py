"""Virtual environments built from a matrix's ``python`` pins, shared by equal pins.

Keyed by a hash of the pins, the runtime packages and the interpreter (never by matrix
name), so two matrices with the same pins share one environment, and an emulated GPU
profile shares the CPU matrix's. A marker file is written last, so an interrupted build
is never mistaken for a finished one; ``.harness-used`` is touched on every use, for
``harness cache prune``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import InfraError, UsageError
from harness.filelock import file_lock
from harness.matrix.model import Matrix, Source
from harness.platform.cache import cache_root
from harness.process import cancel
from harness.process.run import run_captured, run_streaming
from harness.results.layout import Lane

# What the plugin and the suites' runner need besides the matrix's own pins; pinned to
# the versions the harness runs with, so the venv runs the same pytest.
RUNTIME_PACKAGES = ("pytest", "pytest-xdist", "pytest-timeout", "pyyaml")
MARKER = ".harness-complete"
USED = ".harness-used"
# pip's lines worth echoing while an environment builds (one per package, no bars).
PIP_TIMEOUT_S = 3600.0  # a hung index or build is an infrastructure error, not a hang
PIP_PROGRESS = ("Collecting ", "Processing ", "Downloading ", "Installing collected")


def runtime_pins() -> list[str]:
    pins = []
    for name in RUNTIME_PACKAGES:
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pins.append(name)
    return pins


@dataclass(frozen=True, kw_only=True)
class Environment:
    """The resolved environment of one lane: its pins, what it removes, the cache it lives
    in, and its folder there. Resolved once from (matrix, emulate) and carried through a
    run (run/request.py ``RunContext.environment``): the preflight, the interpreter and the
    manifest all read this one."""

    lane: Lane
    requirements: tuple[str, ...]
    remove: tuple[str, ...]
    cache: Path
    sources: tuple[Source, ...]  # pins of the matrix's own public PyPI cannot resolve
    emulation_pins: bool  # an emulated lane's own pins (emulation.requirements), not those

    @classmethod
    def of(cls, matrix: Matrix, *, emulate: bool) -> Environment:
        return cls(lane=Lane(matrix=matrix.name, emulated=emulate),
                   requirements=requirements_for(matrix, emulate=emulate),
                   remove=removals_for(matrix, emulate=emulate), cache=cache_root(matrix),
                   sources=tuple(matrix.python.sources),
                   emulation_pins=bool(emulate and matrix.emulation.requirements))

    @property
    def folder(self) -> Path:
        return venv_dir(self.cache, self.requirements, self.remove)

    @property
    def built(self) -> bool:
        return (self.folder / MARKER).is_file()

    def python(self, *, build: bool = True) -> Path:
        """Its interpreter, the environment built first unless ``build`` is off (a dry run
        only names it)."""
        if not build:
            return venv_python(self.folder)
        return ensure_venv(self.requirements, self.cache, label=str(self.lane),
                           remove=self.remove)


def requirements_for(matrix: Matrix, *, emulate: bool = False) -> tuple[str, ...]:
    """The pins of the environment a run of ``matrix`` uses (its emulation's under --emulate)."""
    if emulate and matrix.emulation.requirements:
        return tuple(matrix.emulation.requirements)
    return tuple(matrix.python.requirements)


def removals_for(matrix: Matrix, *, emulate: bool = False) -> tuple[str, ...]:
    """What that environment uninstalls after its pins (none for an emulation's own pins)."""
    if emulate and matrix.emulation.requirements:
        return ()
    return tuple(matrix.python.remove)


def venv_key(requirements: Sequence[str], remove: Sequence[str] = ()) -> str:
    removed = [f"-{name}" for name in sorted(remove)]  # none: the key pins alone always gave
    text = "\n".join([sys.version, *sorted(requirements), *runtime_pins(), *removed])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def venv_root(cache_root: Path) -> Path:
    return cache_root / "venvs"


def venv_dir(cache_root: Path, requirements: Sequence[str], remove: Sequence[str] = ()) -> Path:
    py = f"py{sys.version_info.major}.{sys.version_info.minor}"
    return venv_root(cache_root) / f"{py}-{venv_key(requirements, remove)}"


def venv_python(path: Path) -> Path:
    return path / "bin" / "python"


def interpreter(choice: str, matrix: Matrix, *, emulate: bool, build: bool = True,
                on_lane_cpu: bool = True, environment: Environment | None = None) -> str:
    """The interpreter ``--python CHOICE`` names for a local run (harness run, repro,
    kernels): ``matrix`` (the lane's environment, ``environment`` where the caller resolved
    it, built first unless ``build`` is off), ``current`` (this one), or a path as given; on
    a lane with an emulated CPU, that interpreter run on it (platform/cpu_emulation.py: a
    wrapper beside it; ``build`` off, only its path), unless ``on_lane_cpu`` is off (a
    standalone script, which runs its case there itself)."""
    env = environment or Environment.of(matrix, emulate=emulate)
    if matrix.cpu.emulated is None or not on_lane_cpu:
        return _chosen(choice, env, build=build)
    from harness.platform.cpu_emulation import cpu_option, qemu, wrap

    cpu_option(matrix.cpu, qemu())  # qemu and the model checked before anything is built
    python = _chosen(choice, env, build=build)
    return wrap(python, matrix.cpu, write=build)


def _chosen(choice: str, env: Environment, *, build: bool) -> str:
    if choice == "current":
        return sys.executable
    if choice == "matrix":
        return str(env.python(build=build))
    found = shutil.which(choice)  # a path, or a name on PATH (python3.12)
    if found is None:
        raise UsageError(f"--python {choice}: no such interpreter (a path to an executable, "
                         "a name on PATH, 'matrix' or 'current')")
    return choice


def ensure_venv(
    requirements: Sequence[str], cache_root: Path, *, label: str = "", echo: bool = True,
    remove: Sequence[str] = (),
) -> Path:
    """Return the interpreter of the environment for ``requirements`` (less ``remove``),
    building it if needed.

    Two jobs sharing the cache build it once: the second waits on the lock, then finds
    the first one's finished environment.
    """
    target = venv_dir(cache_root, requirements, remove)
    lock = venv_root(cache_root) / f".{target.name}.lock"
    with file_lock(lock, f"building the environment for {label or target.name}"):
        return _ensure_venv_locked(requirements, cache_root, label=label, echo=echo,
                                   remove=remove)


def _ensure_venv_locked(
    requirements: Sequence[str], cache_root: Path, *, label: str, echo: bool,
    remove: Sequence[str],
) -> Path:
    target = venv_dir(cache_root, requirements, remove)
    if (target / MARKER).is_file():
        _touch(target / USED)
        return venv_python(target)
    # No marker: absent, or an earlier build was interrupted. Start clean.
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    pins = " ".join(requirements) or "no pins"
    if echo:
        print(f"harness: building the environment for {label or 'these pins'}", flush=True)
        print(f"harness:   pins {pins}", flush=True)
        print(f"harness:   in {target}", flush=True)
        print("harness:   (once per pins; matrices with the same pins share it)", flush=True)
    full = [*requirements, *runtime_pins()]
    started = time.monotonic()
    try:
        _check([sys.executable, "-m", "venv", str(target)], "create the virtualenv")
        _pip_install(venv_python(target), full, echo=echo)
        if remove:
            if echo:
                print(f"harness:   removing {' '.join(remove)} (the matrix's python.remove)",
                      flush=True)
            _check([str(venv_python(target)), "-m", "pip", "uninstall", "-y", *remove],
                   f"uninstall {' '.join(remove)}")
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    (target / MARKER).write_text("\n".join(full) + "\n")
    _touch(target / USED)
    if echo:
        print(f"harness: environment ready in {time.monotonic() - started:.0f}s", flush=True)
    return venv_python(target)


def check_sources(env: Environment) -> None:
    """Before an environment is built: every pin the matrix says public PyPI cannot resolve
    (``python.sources``) resolves with this pip's configuration, or the run stops in one
    line that says where the pin comes from (exit 3, nothing built)."""
    if env.emulation_pins or env.built:
        return  # not the matrix's own pins, or built already: nothing to resolve
    for source in env.sources:
        done = run_captured([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps",
                             "--ignore-installed", "--quiet", "--disable-pip-version-check",
                             source.requirement], timeout_s=600)
        if done.returncode != 0:
            raise InfraError(
                f"matrix {env.lane.matrix} pins {source.requirement}, which pip cannot resolve "
                f"here ({source.why}); it comes from {source.index}: add it with "
                f"PIP_EXTRA_INDEX_URL={source.index} (or a folder of its wheels in "
                "PIP_FIND_LINKS); nothing was built"
            )


def check_pins(env: Environment, pins: Sequence[str]) -> None:
    """Before an environment is built: every ``--pin`` of this run resolves with this pip's
    configuration (the package, at that version, for this interpreter), or the run stops in
    one line (exit 3, nothing built). A pin a ``python.sources`` entry covers is asked
    about there, with where it comes from."""
    if env.built:
        return
    sourced = {s.requirement for s in env.sources}
    for pin in pins:
        if pin in sourced:
            continue
        done = run_captured([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps",
                             "--ignore-installed", "--quiet", "--disable-pip-version-check",
                             pin], timeout_s=600)
        if done.returncode != 0:
            said = [line.strip() for line in (done.stderr or done.stdout).splitlines()
                    if line.startswith("ERROR")]
            why = said[0].removeprefix("ERROR: ") if said else f"pip exit {done.returncode}"
            raise InfraError(f"--pin {pin}: pip cannot resolve it here ({why}); "
                             "nothing was built")


def _touch(path: Path) -> None:
    with contextlib.suppress(OSError):  # a read-only cache still runs
        path.touch()


def _pip_install(python: Path, requirements: list[str], *, echo: bool) -> None:
    """pip install, showing one progress line per package pip starts on (not its bars);
    pip's whole output is kept in the environment's pip.log."""
    argv = [str(python), "-m", "pip", "install", "--disable-pip-version-check",
            "--progress-bar", "off", *requirements]

    def progress(line: str) -> None:
        if echo and line.startswith(PIP_PROGRESS):
            text = line.strip()
            print(f"harness:   pip: {text if len(text) <= 62 else text[:59] + '...'}", flush=True)

    result = run_streaming(argv, env=os.environ | {"PYTHONUNBUFFERED": "1"},
                           log_path=python.parent.parent / "pip.log", prefix="",
                           timeout_s=PIP_TIMEOUT_S, echo=None, on_line=progress)
    if result.interrupted:
        signum = cancel.received()
        raise cancel.Cancelled(signum) if signum and cancel.is_ci_cancel() else KeyboardInterrupt
    if result.exit_code != 0:
        tail = [line.rstrip() for line in result.tail]
        errors = [t for t in tail if "ERROR" in t] or tail[-3:]
        if result.timed_out:
            errors = [f"pip ran over {PIP_TIMEOUT_S:g} s", *errors[-2:]]
        raise InfraError(f"could not install {' '.join(requirements)}: {' | '.join(errors[-3:])}")


def _check(argv: list[str], what: str) -> None:
    done = run_captured(argv, timeout_s=PIP_TIMEOUT_S)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise InfraError(f"could not {what}: {' | '.join(tail)}")


def in_use(matrices: Sequence[Matrix], cache_root: Path) -> set[Path]:
    """The environments these matrices (and their emulations) would use now."""
    return {
        venv_dir(cache_root, requirements_for(m, emulate=emulate),
                 removals_for(m, emulate=emulate)).resolve()
        for m in matrices
        for emulate in (False, True)
    }


def prune(
    cache_root: Path, keep: set[Path], *, older_than_days: float | None = None, dry_run: bool
) -> list[tuple[Path, str]]:
    """Remove environments no matrix uses (and, with older_than_days, unused ones that old).

    Returns (folder, why) for each folder removed (or that would be, under dry_run).
    """
    root = venv_root(cache_root)
    if not root.is_dir():
        return []
    now = time.time()
    removed = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        used = folder / USED
        last = (used if used.is_file() else folder).stat().st_mtime
        age_days = (now - last) / 86400
        if folder.resolve() not in keep:
            why = "no matrix uses these pins" if (folder / MARKER).is_file() else "unfinished build"
        elif older_than_days is not None and age_days > older_than_days:
            why = f"last used {age_days:.0f} days ago"
        else:
            continue
        removed.append((folder, why))
        if not dry_run:
            shutil.rmtree(folder, ignore_errors=True)
    return removed


def folder_size(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total
