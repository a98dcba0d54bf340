"""Parametrize the parity test from the platform: op x case x dtype x provider.

Providers per op: those the platform's ``kernels:`` lists for it (but native, the
reference), plus torch and inductor where they have a kernel for it, plus every capability
provider the platform has (triton, zentorch) that has a kernel for the op, listed or not
(the cpu matrix provides triton, and its e2e runs the triton set), plus any named in
KERNEL_PARITY_PROVIDERS (how a test-only provider is brought in). inductor gets one case
per op: every shape is a compile, and the suite must stay within minutes on a 2-core
host; an op whose first case is a known failure of inductor gets one more
(ONE_CASE_EXTRA), so that the op is still checked somewhere on it.

Cases: the hand-written ones that encode a finding, then those generated over the op's
argument domains and the platform's dtypes (parity_cases.py). The terminal summary lists
the argument values (refengine/ops/domains.py) each provider never saw or declined, for
the ops the run selected; test_coverage.py fails on a value no case has.

Ids end with the device the kernels ran on (``...-bfloat16-torch-cpu``): a finding of a
CPU kernel seen while emulating a GPU profile is recorded for ``-cpu`` only, and does not
claim anything about the GPU.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import pytest
from engine_support import too_old

if too_old():  # refengine cannot load: only test_engine_loads.py runs (and skips)
    collect_ignore = ["test_parity.py", "test_selection.py"]
else:
    from parity_cases import case_dtypes, cases_for, dtypes_for

    from refengine.ops.spec import OP_NAMES

ALWAYS_TRIED = ("torch", "inductor")
ONE_CASE_PROVIDERS = ("inductor",)
# fp8_block_gemm's first case (K=200: a partial last 1x128 group) is a known failure of
# inductor's CPU code on every lane (matrices/*.yaml); without a whole-group case a bug
# anywhere else in the compiled block GEMM (a block edge off by one) would pass unseen.
ONE_CASE_EXTRA = {"fp8_block_gemm": ("3d-k256-fp32",)}
# Providers named like a capability: tried wherever the platform has that capability.
CAPABILITY_PROVIDERS = ("triton", "zentorch", "vllm")
# Providers that exist only where the platform has the capability of the same name (the
# parity test skips them with the capability's reason elsewhere).
CAPABILITY_GATED = ("inductor", *CAPABILITY_PROVIDERS)
EXTRA_ENV = "KERNEL_PARITY_PROVIDERS"


def _profile(config: pytest.Config) -> Any:
    from harness.plugin import _stash_key

    session = config.stash.get(_stash_key(), None)
    return None if session is None else session.profile


def _has_kernel(profile: Any, name: str, op: str) -> bool:
    from refengine.providers import get_provider

    if not profile.matrix.capabilities.known(name) or profile.why_missing(name):
        return False
    provider = get_provider(name, profile.device)
    return op in getattr(provider, "ops", lambda: ())()


def providers_for(profile: Any, op: str) -> tuple[str, ...]:
    from refengine.providers import get_provider, offers

    listed = [name for name in profile.matrix.kernels.get(op, ()) if name != "native"]
    tried = [name for name in ALWAYS_TRIED if offers(get_provider(name, profile.device), op)]
    capable = [name for name in CAPABILITY_PROVIDERS if _has_kernel(profile, name, op)]
    extra = [n.strip() for n in os.environ.get(EXTRA_ENV, "").split(",") if n.strip()]
    return tuple(dict.fromkeys([*listed, *tried, *capable, *extra]))


def provider_cases(op: str, provider: str, dtypes: tuple[str | None, ...]) -> tuple[Any, ...]:
    """The op's cases: the kept ones, then those generated over its domains and ``dtypes``
    (each generated case runs on the dtypes its rows name); inductor takes the first and
    the op's ONE_CASE_EXTRA, on every dtype."""
    cases = cases_for(op, tuple(d for d in dtypes if d))
    if provider not in ONE_CASE_PROVIDERS:
        return cases
    extra = ONE_CASE_EXTRA.get(op, ())
    chosen = cases[:1] + tuple(case for case in cases[1:] if case.id in extra)
    return tuple(dataclasses.replace(case, dtypes=None) for case in chosen)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "parity_param" not in metafunc.fixturenames:
        return
    profile = _profile(metafunc.config)
    params: list[Any] = []
    if profile is None:
        params.append(pytest.param(None, id="no-platform"))
    else:
        for op in OP_NAMES:
            dtypes = dtypes_for(profile, op)
            for provider in providers_for(profile, op):
                for n, case in enumerate(provider_cases(op, provider, dtypes)):
                    # the smoke tier (e.g. s390x) runs each op's first case per provider
                    marks = [pytest.mark.tier("smoke")] if n == 0 else []
                    for dtype in case_dtypes(case, dtypes):
                        test_id = (f"{op}-{case.id}-{dtype or 'nofp8'}-{provider}"
                                   f"-{profile.device}")
                        params.append(pytest.param((op, case, dtype, provider), id=test_id,
                                                   marks=marks))
    metafunc.parametrize("parity_param", params)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Where the platform has vLLM's kernels: which of its libraries they came from (a
    suite property; the run lifts it into the device fingerprint)."""
    profile = _profile(session.config)
    if profile is None or hasattr(session.config, "workerinput") or too_old():
        return
    if not profile.matrix.capabilities.known("vllm") or profile.why_missing("vllm"):
        return
    from _pytest.junitxml import xml_key

    from refengine.providers.vllm_library import kernel_library

    xml = session.config.stash.get(xml_key, None)
    if xml is not None and kernel_library():
        xml.add_global_property("kernel_library", f"vllm {kernel_library()}")


_RUN_OPS = pytest.StashKey[set[str]]()


def pytest_collection_finish(session: pytest.Session) -> None:
    """The ops whose parity tests this run selected (the summary is about those)."""
    ops = set()
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        param = callspec.params.get("parity_param") if callspec else None
        if param:
            ops.add(param[0])
    session.config.stash[_RUN_OPS] = ops


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    profile = _profile(config)
    # None where this process collected nothing (an xdist controller): every op
    ops = config.stash.get(_RUN_OPS, None)
    if profile is None or too_old() or ops == set():
        return
    from arg_coverage import platform_coverage, summary_lines

    lines = summary_lines(platform_coverage(profile, providers_for, provider_cases,
                                            dtypes_for, ops))
    if lines:
        terminalreporter.section("argument values a provider never saw or declined")
        for line in lines:
            terminalreporter.write_line(line)
