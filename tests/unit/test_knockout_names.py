"""The op knock-out's switch (harness/plugin/knockout.py): the names HARNESS_KNOCK_OUT
holds, and a malformed one as a usage error; tests/integration/test_op_knockout.py knocks
real ops out."""

from __future__ import annotations

import sys

import pytest

from harness.plugin import knockout


def test_the_names_are_comma_separated_in_order_once_each() -> None:
    assert knockout.names("_C::rms_norm,_C::onednn_mm") == ("_C::rms_norm", "_C::onednn_mm")
    assert knockout.names(" _C::a , ,vllm::b,_C::a,") == ("_C::a", "vllm::b")
    assert knockout.names("") == () and knockout.names(None) == () and knockout.names(" , ") == ()


@pytest.mark.parametrize("bad", ["rms_norm", "_C:rms_norm", "::rms_norm", "_C::",
                                 "_C::rms_norm.default", "_C::rms norm", "a::b::c"])
def test_a_name_that_is_no_namespace_op_is_refused_naming_the_variable(bad: str) -> None:
    with pytest.raises(ValueError) as raised:
        knockout.names(f"_C::rms_norm,{bad}")
    assert str(raised.value) == (f"HARNESS_KNOCK_OUT: {bad.strip()!r} is not a namespace::op "
                                 "name (e.g. _C::rms_norm)")


def test_a_malformed_name_is_a_one_line_usage_error(monkeypatch: pytest.MonkeyPatch,
                                                    request: pytest.FixtureRequest) -> None:
    monkeypatch.setenv(knockout.SWITCH, "_C::rms_norm,rms_norm")
    with pytest.raises(pytest.UsageError) as raised:
        knockout.register(request.config)
    assert str(raised.value) == ("HARNESS_KNOCK_OUT: 'rms_norm' is not a namespace::op name "
                                 "(e.g. _C::rms_norm)")
    assert not request.config.pluginmanager.has_plugin("harness-knock-out")


@pytest.mark.parametrize("value", [None, "", " , "])
def test_without_the_variable_nothing_is_registered_or_hooked(
        monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest,
        value: str | None) -> None:
    if value is None:
        monkeypatch.delenv(knockout.SWITCH, raising=False)
    else:
        monkeypatch.setenv(knockout.SWITCH, value)
    before = list(sys.meta_path)
    knockout.register(request.config)
    assert not request.config.pluginmanager.has_plugin("harness-knock-out")
    assert sys.meta_path == before and not knockout._PENDING
