"""Checks that span keys: capability names, required keys, and consistency rules.

These run after the type walk passed, so every value has the declared shape.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.errors import ConfigError
from harness.matrix import schema as S
from harness.matrix.validate import _Ref, did_you_mean
from harness.matrix.yamlsafe import LDict, LList, Loc

# The device torch uses for each family: ROCm builds of torch answer to "cuda".
FAMILY_DEVICE = {"cuda": "cuda", "rocm": "cuda", "xpu": "xpu", "cpu": "cpu"}
# Providers that only exist where the platform provides the capability of the same name.
PROVIDER_CAPABILITY = {"zentorch": "zentorch", "triton": "triton", "inductor": "inductor"}
LOADER_KEYS = ("file", "tolerances.origins", "lane_data")


def where_of(merged: LDict, path: str) -> Loc:
    """The file:line that set ``path`` (dotted), or of its nearest parent that exists."""
    node: object = merged
    where: Loc = merged.at
    for part in path.split("."):
        if not isinstance(node, LDict) or part not in node:
            break
        where = node.where(part)
        node = node[part]
    return where


def get(merged: LDict, path: str) -> object:
    node: object = merged
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _mapping(value: object) -> Mapping[str, object]:
    """A mapping as the type walk passed it; anything else (None: not set) as empty."""
    return value if isinstance(value, dict) else {}


def _strings(value: object) -> list[str]:
    """A list of strings as the type walk passed it; anything else (None: not set) as
    empty."""
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


class _Errors(list[ConfigError]):
    def add(self, merged: LDict, path: str, message: str, where: Loc | None = None) -> None:
        file, line = where or where_of(merged, path)
        self.append(ConfigError(message, file=file, line=line, key=path))


def check_semantics(merged: LDict, refs: list[_Ref], *, shapes_ok: bool) -> list[ConfigError]:
    """Cross-key checks; those that read values of a declared shape need ``shapes_ok``."""
    errors = _Errors()
    catalog = merged.get("capability_catalog")
    catalog = catalog if isinstance(catalog, dict) else {}
    for ref in refs:
        if ref.value not in catalog:
            errors.append(
                ConfigError(
                    f"unknown capability {ref.value!r}{did_you_mean(ref.value, list(catalog))}",
                    file=ref.where[0],
                    line=ref.where[1],
                    key=ref.path,
                )
            )
    if shapes_ok:
        _check_catalog_cycles(merged, catalog, errors)
    _check_loader_keys(merged, errors)
    if merged.get("abstract") is True:
        return list(errors)
    _check_required(merged, errors, shapes_ok=shapes_ok)
    if not shapes_ok:
        return list(errors)
    provides = set(_strings(get(merged, "capabilities.provides")))
    family, device = merged.get("family"), merged.get("device")
    if (
        isinstance(family, str)
        and family in FAMILY_DEVICE
        and device is not None
        and FAMILY_DEVICE[family] != device
    ):
        errors.add(
            merged,
            "device",
            f"family {family} runs on torch device {FAMILY_DEVICE[family]!r}, got {device!r}",
        )
    _check_kernels(merged, provides, errors)
    _check_numerics(merged, provides, errors)
    _check_cpu(merged, errors)
    return list(errors)


def _check_cpu(merged: LDict, errors: _Errors) -> None:
    """An emulated CPU: a level qemu can be (v2, v3), or a model name (checked against
    qemu's own list when a run starts); only on a CPU lane."""
    from harness.matrix.model import CPU_LEVELS, NO_TCG_LEVELS

    value = get(merged, "cpu.emulated")
    if not isinstance(value, str):  # None: the agent's own CPU
        return
    if merged.get("device") != "cpu":
        errors.add(merged, "cpu.emulated", f"an emulated CPU is for a CPU lane (device cpu), "
                   f"not device {merged.get('device')!r}")
    elif value in NO_TCG_LEVELS:
        errors.add(merged, "cpu.emulated", f"{value} needs {NO_TCG_LEVELS[value]}, which "
                   "qemu's TCG does not emulate: its CPUs stay with real agents (and "
                   "ONEDNN_MAX_CPU_ISA caps oneDNN on them)")
    elif value.startswith("x86-64-") and value not in CPU_LEVELS:
        errors.add(merged, "cpu.emulated", f"unknown x86-64 level {value!r} (emulated: "
                   f"{', '.join(CPU_LEVELS)})")


def _check_loader_keys(merged: LDict, errors: _Errors) -> None:
    """Keys the loader sets (a matrix's own file, a known failure's file and line)."""
    for key in LOADER_KEYS:
        if get(merged, key) is not None:
            errors.add(merged, key, "set by the loader; remove it from the matrix file")
    failures = merged.get("known_failures")
    for index, entry in enumerate(failures if isinstance(failures, list) else []):
        for key in ("file", "line"):
            if not isinstance(entry, dict):
                break
            if key in entry:
                at = entry.where(key) if isinstance(entry, LDict) else merged.at
                errors.add(
                    merged,
                    f"known_failures[{index}].{key}",
                    "set by the loader; remove it from the matrix file",
                    at,
                )


def _check_required(merged: LDict, errors: _Errors, *, shapes_ok: bool) -> None:
    """What a concrete (not abstract) matrix must set, and every suite's path."""
    for path in S.CONCRETE_REQUIRED:
        if get(merged, path) in (None, "", []):
            parent = path.rpartition(".")[0]
            errors.add(
                merged,
                path,
                "missing required key",
                where_of(merged, parent) if parent else (merged.at[0], None),
            )
    if not shapes_ok:
        return
    for suite, entry in _mapping(merged.get("suites")).items():
        if "path" not in _mapping(entry):
            errors.add(
                merged,
                f"suites.{suite}.path",
                "missing required key",
                where_of(merged, f"suites.{suite}"),
            )


def _check_catalog_cycles(
    merged: LDict, catalog: Mapping[str, object], errors: _Errors
) -> None:
    for name in catalog:
        seen = [name]
        parent = _mapping(catalog[name]).get("parent")
        while isinstance(parent, str) and parent in catalog:
            if parent in seen:
                errors.add(
                    merged,
                    f"capability_catalog.{name}",
                    f"parent cycle: {' -> '.join([*seen, parent])}",
                )
                break
            seen.append(parent)
            parent = _mapping(catalog[parent]).get("parent")


def _check_kernels(merged: LDict, provides: set[str], errors: _Errors) -> None:
    for op, providers in _mapping(merged.get("kernels")).items():
        if not providers:
            errors.add(merged, f"kernels.{op}", "needs at least one provider")
            continue
        for index, provider in enumerate(_strings(providers)):
            cap = PROVIDER_CAPABILITY.get(provider)
            if cap is not None and cap not in provides:
                at = providers.where(index) if isinstance(providers, LList) else None
                errors.add(
                    merged,
                    f"kernels.{op}[{index}]",
                    f"provider {provider} needs capability {cap} in capabilities.provides",
                    at,
                )


def _check_numerics(merged: LDict, provides: set[str], errors: _Errors) -> None:
    by_dtype = _mapping(get(merged, "tolerances.by_dtype"))
    dtypes = _strings(merged.get("dtypes"))
    if not dtypes:
        errors.add(merged, "dtypes", "needs at least one dtype")
    for dtype in dtypes:
        if dtype not in by_dtype:
            errors.add(merged, "dtypes", f"{dtype} has no tolerance in tolerances.by_dtype")
    for flavour in ("e4m3", "e5m2"):
        fp8 = get(merged, f"fp8.{flavour}")
        if not isinstance(fp8, str):  # None: the platform has no such fp8
            continue
        cap = "fp8_" + fp8.removeprefix("float8_")
        if cap not in provides:
            errors.add(
                merged, f"fp8.{flavour}", f"{fp8} needs capability {cap} in capabilities.provides"
            )
        if fp8 not in by_dtype:
            errors.add(merged, f"fp8.{flavour}", f"{fp8} has no tolerance in tolerances.by_dtype")
    big = "big_endian" in provides
    if big != (merged.get("byteorder") == "big"):
        errors.add(merged, "byteorder", "byteorder big and capability big_endian go together")
