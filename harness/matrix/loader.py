"""Find, read, merge, validate and build matrices: the entry points other parts call."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from pathlib import Path

from harness.errors import ConfigError, ConfigErrors
from harness.matrix.build import build, plain
from harness.matrix.checks import check_semantics
from harness.matrix.merge import Chain, load_chain
from harness.matrix.model import Matrix
from harness.matrix.suite_paths import resolve_suite_paths
from harness.matrix.validate import check_types
from harness.matrix.yamlsafe import LDict, LList, ldict, llist
from harness.roots import locate, matrix_dirs, project_root, shipped_root


def display_path(path: Path, root: Path) -> str:
    """Relative to the project root or the shipped root; as given for anything else."""
    for base in (root, shipped_root()):
        try:
            return path.resolve().relative_to(base.resolve()).as_posix()
        except ValueError:
            continue
    return str(path)


def _matrix_files(root: Path) -> dict[str, Path]:
    """name -> file; the project's matrices hide shipped ones of the same name."""
    found: dict[str, Path] = {}
    for folder in matrix_dirs(root):
        for path in sorted(folder.glob("*.yaml"), key=lambda p: p.stem):
            found.setdefault(path.stem, path)
    return found


def list_matrices(root: Path | None = None) -> list[str]:
    """Names of the concrete (non-abstract) matrices: the project's and the shipped ones."""
    files = _matrix_files(root or project_root())
    return sorted(name for name, path in files.items() if not _declares_abstract(path))


def _declares_abstract(path: Path) -> bool:
    # A cheap line scan: listing must not fail because one file is broken.
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            return any(re.match(r"abstract:\s*true\b", line) for line in handle)
    except OSError:
        return False


def find_matrix(name_or_path: str | Path, root: Path) -> Path:
    text = str(name_or_path)
    candidate = Path(text).expanduser()
    if isinstance(name_or_path, Path) or "/" in text or text.endswith((".yaml", ".yml", ".json")):
        if candidate.is_file():
            return candidate
        if not candidate.is_absolute() and locate(text, root).is_file():
            return locate(text, root)
        raise ConfigError("no such matrix file", file=text)
    files = _matrix_files(root)
    if text in files:
        return files[text]
    names = sorted(files)
    near = difflib.get_close_matches(text, names, n=1)
    hint = f" (did you mean {near[0]}?)" if near else ""
    shown = ", ".join(n for n in names if n != "base") or "none"
    raise ConfigError(f"no matrix named {text!r}{hint}; available: {shown}")


def _origins(merged: LDict, abstract_files: frozenset[str]) -> dict[str, str]:
    tol = merged.get("tolerances")
    by_dtype = tol.get("by_dtype") if isinstance(tol, LDict) else None
    if not isinstance(by_dtype, LDict):
        return {}
    return {d: "base" if by_dtype.where(d)[0] in abstract_files else "platform" for d in by_dtype}


# What a lane's per-lane files (golden ids, fusion expectations) depend on: its engine and
# pins, its CPU, its device and kernels (runtime: only its env, an ISA cap say).
LANE_DATA_KEYS = ("family", "device", "arch", "byteorder", "dtypes", "fp8", "kernels",
                  "capabilities", "python", "image", "cpu", "emulation", "runtime.env")


def lane_data_chain(chain: Chain, name: str) -> list[str]:
    """The lanes whose per-lane files a matrix reads, its own first: then its parent's, and
    on up, while the file below sets none of LANE_DATA_KEYS (a matrix that extends a lane
    for its suites, an imported CI step, reads its parent's golden ids until it records
    its own); never an abstract parent's."""
    lanes = [name]
    for (_, child), (shown, parent) in zip(reversed(chain.files), reversed(chain.files[:-1]),
                                           strict=False):
        if parent.get("abstract") is True or any(_sets(child, key) for key in LANE_DATA_KEYS):
            break
        own = parent.get("name")
        lanes.append(own if isinstance(own, str) and own else Path(shown).stem)
    return lanes


def _sets(data: Mapping[str, object], dotted: str) -> bool:
    """Whether a matrix file sets ``dotted`` (or appends to it: ``key+``)."""
    head, _, rest = dotted.partition(".")
    found = [value for key, value in data.items() if key.rstrip("+") == head]
    if not rest:
        return bool(found)
    return any(isinstance(value, Mapping) and _sets(value, rest) for value in found)


def resolve_chain(chain: Chain, name: str, file: str) -> dict[str, object]:
    merged = chain.merged
    body = plain(merged)
    resolved: dict[str, object] = {
        "name": body.pop("name", name),
        "file": file,
        "extends": body.pop("extends", None),
        "abstract": bool(body.pop("abstract", False)),
        **body,
    }
    tol = resolved.setdefault("tolerances", {})
    if isinstance(tol, dict):
        tol["origins"] = _origins(merged, chain.abstract_files)
    failures, entries = merged.get("known_failures"), resolved.get("known_failures")
    if isinstance(failures, LList) and isinstance(entries, list):
        for index, entry in enumerate(entries):
            if isinstance(entry, dict):
                entry["file"], entry["line"] = failures.where(index)
    lanes = lane_data_chain(chain, str(resolved["name"]))
    if len(lanes) > 1:  # only where it inherits: a lane's own data keeps its hash as it was
        resolved["lane_data"] = lanes
    return resolved


def load_matrix(name_or_path: str | Path, root: Path | None = None) -> Matrix:
    """Load a matrix by name (``rocm``), by YAML path, or from a resolved ``matrix.json``."""
    root = (root or project_root()).resolve()
    path = find_matrix(name_or_path, root)
    shown = display_path(path, root)
    if path.suffix == ".json":
        return _load_resolved(path, shown)
    located: dict[str, Path] = {}  # shown name -> the file, to read suite paths against

    def show(file: Path) -> str:
        shown_file = display_path(file, root)
        located[shown_file] = file.resolve()
        return shown_file

    # extends: a file beside the matrix, else a shipped one (base.yaml, cpu.yaml, ...).
    chain = load_chain(path, shipped_root() / "matrices", show)
    merged = chain.merged
    errors, refs = check_types(merged)
    errors += check_semantics(merged, refs, shapes_ok=not errors)
    if errors:
        errors.sort(key=lambda e: (e.file or "", e.line or 0))
        raise errors[0] if len(errors) == 1 else ConfigErrors(errors)
    own_name = merged.get("name")
    name = own_name if isinstance(own_name, str) and own_name else path.stem
    _check_name(merged, path, root, shown)
    resolved = resolve_chain(chain, name, shown)
    resolve_suite_paths(resolved, merged, located, root)
    return build(resolved, name=name, file=shown, source=merged)


def _check_name(merged: LDict, path: Path, root: Path, shown: str) -> None:
    """A matrix in a ``matrices/`` folder is found, listed, and declared to the report
    by its file name, and its runs are filed by its ``name:``: the two must agree. A
    matrix passed by a path elsewhere (``--matrix ./my-mi300.yaml``) may name itself."""
    name = merged.get("name")
    if name is None or name == path.stem:
        return
    folder = path.resolve().parent
    if folder not in {d.resolve() for d in matrix_dirs(root)}:
        return
    _, line = merged.where("name")
    raise ConfigError(
        f"{name!r} differs from the file name {path.stem!r} (a matrix in a matrices/ "
        "folder is looked up by its file name; rename one of them)",
        file=shown,
        line=line,
        key="name",
    )


def _load_resolved(path: Path, shown: str) -> Matrix:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read resolved matrix: {error}", file=shown) from None
    return matrix_from_json(text, shown)


def matrix_from_json(text: str, shown: str) -> Matrix:
    """A resolved matrix (a run folder's ``matrix.json``), checked like a YAML one."""
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ConfigError(f"cannot read resolved matrix: {error}", file=shown) from None
    if not isinstance(data, dict):
        raise ConfigError("a resolved matrix must be a JSON object", file=shown)
    errors, _ = check_types(_as_located(data, shown))
    if errors:
        raise errors[0] if len(errors) == 1 else ConfigErrors(errors)
    try:
        return build(data, name=str(data.get("name", Path(shown).stem)),
                     file=str(data.get("file", shown)))
    except (TypeError, KeyError, ValueError) as error:  # a hand-made or truncated file
        raise ConfigError(f"not a resolved matrix ({error})", file=shown) from None


def _as_located(data: Mapping[str, object], shown: str) -> LDict:
    return ldict({k: _located(v, shown) for k, v in data.items()}, (shown, None))


def _located(value: object, shown: str) -> object:
    if isinstance(value, dict):
        return _as_located(value, shown)
    if isinstance(value, list):
        return llist([_located(v, shown) for v in value], (shown, None))
    return value
