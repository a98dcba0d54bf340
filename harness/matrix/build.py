"""Turn a validated, merged mapping into the frozen ``Matrix`` dataclasses."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from harness.matrix.model import (
    Caches,
    Capabilities,
    CapabilityDef,
    Ci,
    Cpu,
    Download,
    Emulation,
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


def plain(value: Any) -> Any:
    """Located containers and dates -> JSON-able builtins."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, datetime.date):
        return value.isoformat()
    return value


def _tol(raw: Any) -> Tol:
    if raw == "bitwise":
        return Tol(atol=0.0, rtol=0.0, bitwise=True)
    return Tol(atol=float(raw["atol"]), rtol=float(raw["rtol"]))


def _map(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    return dict(raw or {})


def _kw(raw: Mapping[str, Any] | None, tuples: tuple[str, ...] = ()) -> dict[str, Any]:
    out = _map(raw)
    for key in tuples:
        if key in out:
            out[key] = tuple(out[key])
    return out


def known_failures(raw: list[Any], source: Any) -> tuple[KnownFailure, ...]:
    out = []
    for index, entry in enumerate(raw):
        where = source.where(index) if isinstance(source, LList) else (None, None)
        expires = entry.get("expires")
        if isinstance(expires, str):
            expires = datetime.date.fromisoformat(expires)
        out.append(
            KnownFailure(
                id=entry["id"],
                reason=entry["reason"],
                issue=entry.get("issue"),
                owner=entry.get("owner"),
                expires=expires,
                action=entry.get("action", "xfail"),
                requires=tuple(entry.get("requires", ())),
                expect=entry.get("expect"),
                host=_host(entry.get("host")),
                engine_fallback=entry.get("engine_fallback", ""),
                line=entry.get("line", where[1]),
                file=entry.get("file", where[0]),
            )
        )
    return tuple(out)


def _python(raw: Mapping[str, Any] | None) -> PythonEnv:
    values = _kw(raw, ("requirements", "remove"))
    values["sources"] = tuple(Source(**s) for s in values.get("sources", ()))
    return PythonEnv(**values)


def _host(raw: Mapping[str, Any] | None) -> HostCondition | None:
    if not raw:
        return None
    return HostCondition(cpu_flags=tuple(raw.get("cpu_flags", ())),
                         cpu_flags_absent=tuple(raw.get("cpu_flags_absent", ())))


def _catalog(r: dict[str, Any]) -> dict[str, CapabilityDef]:
    return {
        cap: CapabilityDef(
            name=cap,
            parent=d.get("parent"),
            hardware=bool(d.get("hardware", False)),
            emulable=bool(d.get("emulable", not d.get("hardware", False))),
            description=d.get("description", ""),
        )
        for cap, d in _map(r.get("capability_catalog")).items()
    }


def _image(r: dict[str, Any]) -> Image:
    image = _kw(r.get("image"))
    image["downloads"] = tuple(Download(**d) for d in image.get("downloads", ()))
    image.setdefault("dockerfile", None)
    image.setdefault("base", None)
    return Image(**image)


def build(resolved: dict[str, Any], *, name: str, file: str, source: LDict | None = None) -> Matrix:
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
        extends=r.get("extends"),
        abstract=bool(r.get("abstract", False)),
        description=r.get("description", ""),
        family=r.get("family", "cpu"),
        hardware=r.get("hardware", ""),
        device=r.get("device", "cpu"),
        arch=tuple(r.get("arch", ())),
        byteorder=r.get("byteorder", "little"),
        capabilities=Capabilities(
            platform=name,
            catalog=_catalog(r),
            provides=frozenset(_map(r.get("capabilities")).get("provides", ())),
        ),
        dtypes=tuple(r.get("dtypes", ())),
        fp8=Fp8(**_map(r.get("fp8"))),
        kernels={op: tuple(p) for op, p in _map(r.get("kernels")).items()},
        tolerances=Tolerances(
            by_dtype={d: _tol(t) for d, t in _map(tol.get("by_dtype")).items()},
            ops={
                op: {d: _tol(t) for d, t in per.items()} for op, per in _map(tol.get("ops")).items()
            },
            origins=_map(tol.get("origins")),
        ),
        python=_python(r.get("python")),
        image=_image(r),
        runtime=Runtime(
            **_kw(
                r.get("runtime"),
                ("devices", "group_add", "security_opt", "cap_add", "env_allowlist", "preload"),
            )
        ),
        probe=Probe(**_map(r.get("probe"))),
        caches=Caches(**_map(r.get("caches"))),
        suites=suites,
        known_failures=known_failures(list(r.get("known_failures", ())), kf_source),
        ci=_ci(_map(r.get("ci"))),
        emulation=Emulation(**_kw(r.get("emulation"), ("requirements",))),
        cpu=Cpu(**_map(r.get("cpu"))),
        resolved=r,
    )


def _ci(raw: dict[str, Any]) -> Ci:
    labels = raw.get("runs_on")
    return Ci(**{**raw, "runs_on": tuple(labels) if labels is not None else None})
