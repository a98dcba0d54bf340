"""Turn a validated, merged mapping into the frozen ``Matrix`` dataclasses.

The type walk (``validate.py``) has checked every value against ``schema.py`` first, so
the helpers below only narrow each value they read to the type it was found to have (a
TypeError would be a bug in the walk).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeVar, overload

from harness.matrix.model import (
    Caches,
    Capabilities,
    CapabilityDef,
    Ci,
    Cpu,
    Download,
    Emulation,
    Family,
    Fp8,
    HostCondition,
    Image,
    KnownFailure,
    Matrix,
    Probe,
    PythonEnv,
    Runtime,
    Source,
    Suite,
    Tol,
    Tolerances,
)
from harness.matrix.yamlsafe import LDict, LList

_V = TypeVar("_V")
_S = TypeVar("_S", bound=str)

# The values of the model's Literal fields, as schema.py declares them.
_FAMILIES: tuple[Family, ...] = ("cuda", "rocm", "xpu", "cpu")
_BYTE_ORDERS: tuple[Literal["little", "big"], ...] = ("little", "big")
_ACTIONS: tuple[Literal["xfail", "skip", "quarantine"], ...] = ("xfail", "skip", "quarantine")


@overload
def plain(value: dict[str, object]) -> dict[str, object]: ...


@overload
def plain(value: object) -> object: ...


def plain(value: object) -> object:
    """Located containers and dates -> JSON-able builtins."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, datetime.date):
        return value.isoformat()
    return value


def _as(value: object, kind: type[_V]) -> _V:
    """``value``, which the type walk found to be a ``kind``."""
    if isinstance(value, kind):
        return value
    raise TypeError(f"expected {kind.__name__}, got {value!r}")


def _opt(value: object, kind: type[_V]) -> _V | None:
    """``value``, which the type walk found to be a ``kind`` or null."""
    return None if value is None else _as(value, kind)


def _items(value: object) -> tuple[object, ...]:
    """A list's items (or a default's: a tuple)."""
    if isinstance(value, list | tuple):
        return tuple(value)
    raise TypeError(f"expected a list, got {value!r}")


def _strs(value: object) -> tuple[str, ...]:
    """A list of strings as a tuple."""
    return tuple(_as(item, str) for item in _items(value))


def _number(value: object) -> float:
    """An integer or a float, as a float."""
    if isinstance(value, int | float):
        return float(value)
    raise TypeError(f"expected a number, got {value!r}")


def _choice(value: object, choices: tuple[_S, ...]) -> _S:
    """``value`` as the one of ``choices`` (a Literal type's values) it is."""
    for choice in choices:
        if value == choice:
            return choice
    raise TypeError(f"expected one of {', '.join(choices)}, got {value!r}")


def _date(value: object) -> datetime.date | None:
    """A date as the resolved matrix writes it (ISO text), or null."""
    if isinstance(value, str):
        return datetime.date.fromisoformat(value)
    return _opt(value, datetime.date)


def _tol(raw: object) -> Tol:
    if raw == "bitwise":
        return Tol(atol=0.0, rtol=0.0, bitwise=True)
    values = _map(raw)
    return Tol(atol=_number(values["atol"]), rtol=_number(values["rtol"]))


def _map(raw: object) -> dict[str, object]:
    """A mapping's items (null or not set: none)."""
    if isinstance(raw, Mapping):
        return dict(raw)
    if raw:
        raise TypeError(f"expected a mapping, got {raw!r}")
    return {}


def _kw(raw: object, tuples: tuple[str, ...] = ()) -> dict[str, Any]:
    """A mapping as the keyword arguments of the dataclass whose fields are its keys, with
    the lists of ``tuples`` as tuples. Not ``dict[str, object]``: mypy checks the values
    of a ``**`` argument against every field's type; the type walk (``validate.py``) has
    checked each value against its own field's."""
    out = _map(raw)
    for key in tuples:
        if key in out:
            out[key] = _items(out[key])
    return out


def known_failures(raw: Iterable[object], source: object) -> tuple[KnownFailure, ...]:
    out = []
    for index, item in enumerate(raw):
        where = source.where(index) if isinstance(source, LList) else (None, None)
        entry = _map(item)
        out.append(
            KnownFailure(
                id=_as(entry["id"], str),
                reason=_as(entry["reason"], str),
                issue=_opt(entry.get("issue"), str),
                owner=_opt(entry.get("owner"), str),
                expires=_date(entry.get("expires")),
                action=_choice(entry.get("action", "xfail"), _ACTIONS),
                requires=_strs(entry.get("requires", ())),
                expect=_opt(entry.get("expect"), dict),
                host=_host(entry.get("host")),
                engine_fallback=_as(entry.get("engine_fallback", ""), str),
                line=_opt(entry.get("line", where[1]), int),
                file=_opt(entry.get("file", where[0]), str),
            )
        )
    return tuple(out)


def _python(raw: object) -> PythonEnv:
    values = _kw(raw, ("requirements", "remove"))
    values["sources"] = tuple(Source(**_kw(s)) for s in _items(values.get("sources", ())))
    return PythonEnv(**values)


def _host(raw: object) -> HostCondition | None:
    if not raw:
        return None
    values = _map(raw)
    return HostCondition(cpu_flags=_strs(values.get("cpu_flags", ())),
                         cpu_flags_absent=_strs(values.get("cpu_flags_absent", ())))


def _capability(name: str, raw: object) -> CapabilityDef:
    d = _map(raw)
    return CapabilityDef(
        name=name,
        parent=_opt(d.get("parent"), str),
        hardware=bool(d.get("hardware", False)),
        emulable=bool(d.get("emulable", not d.get("hardware", False))),
        description=_as(d.get("description", ""), str),
    )


def _catalog(r: Mapping[str, object]) -> dict[str, CapabilityDef]:
    return {cap: _capability(cap, d) for cap, d in _map(r.get("capability_catalog")).items()}


def _image(r: Mapping[str, object]) -> Image:
    image = _kw(r.get("image"))
    image["downloads"] = tuple(Download(**_kw(d)) for d in _items(image.get("downloads", ())))
    image.setdefault("dockerfile", None)
    image.setdefault("base", None)
    return Image(**image)


def build(
    resolved: Mapping[str, object], *, name: str, file: str, source: LDict | None = None
) -> Matrix:
    """``resolved`` is plain (see ``plain``); ``source`` the located merge, when known."""
    r = resolved
    tol = _map(r.get("tolerances"))
    suites = {
        key: Suite(name=key, **_kw(value, ("pytest_args",)))
        for key, value in _map(r.get("suites")).items()
    }
    kf_source = source.get("known_failures") if source is not None else None
    return Matrix(
        name=name,
        file=file,
        extends=_opt(r.get("extends"), str),
        abstract=bool(r.get("abstract", False)),
        inherits_lane_data=_strs(r.get("lane_data", ()))[1:],
        description=_as(r.get("description", ""), str),
        family=_choice(r.get("family", "cpu"), _FAMILIES),
        hardware=_as(r.get("hardware", ""), str),
        device=_as(r.get("device", "cpu"), str),
        arch=_strs(r.get("arch", ())),
        byteorder=_choice(r.get("byteorder", "little"), _BYTE_ORDERS),
        capabilities=Capabilities(
            platform=name,
            catalog=_catalog(r),
            provides=frozenset(_strs(_map(r.get("capabilities")).get("provides", ()))),
        ),
        dtypes=_strs(r.get("dtypes", ())),
        fp8=Fp8(**_kw(r.get("fp8"))),
        kernels={op: _strs(p) for op, p in _map(r.get("kernels")).items()},
        tolerances=Tolerances(
            by_dtype={d: _tol(t) for d, t in _map(tol.get("by_dtype")).items()},
            ops={
                op: {d: _tol(t) for d, t in _map(per).items()}
                for op, per in _map(tol.get("ops")).items()
            },
            origins={d: _as(o, str) for d, o in _map(tol.get("origins")).items()},
        ),
        python=_python(r.get("python")),
        image=_image(r),
        runtime=Runtime(
            **_kw(
                r.get("runtime"),
                ("devices", "group_add", "security_opt", "cap_add", "env_allowlist", "preload"),
            )
        ),
        probe=Probe(**_kw(r.get("probe"))),
        caches=Caches(**_kw(r.get("caches"))),
        suites=suites,
        known_failures=known_failures(_items(r.get("known_failures", ())), kf_source),
        ci=_ci(r.get("ci")),
        emulation=Emulation(**_kw(r.get("emulation"), ("requirements",))),
        cpu=Cpu(**_kw(r.get("cpu"))),
        resolved=r,
    )


def _ci(raw: object) -> Ci:
    values = _kw(raw)
    labels = values.get("runs_on")
    values["runs_on"] = _strs(labels) if labels is not None else None
    return Ci(**values)
