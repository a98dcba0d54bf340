"""The op record's one format (harness/results/op_record.py) and its counter on torch's own
op classes (harness/plugin/ops.py), with a real op registered through torch.library;
tests/integration/test_op_record.py runs the record in real suites."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.plugin import ops
from harness.results.op_record import namespace, parse, render


def test_a_record_is_its_keys_with_their_counts_in_key_order() -> None:
    counts = {"vllm/rms_norm": 3, "_C::rms_norm": 3, "_C::silu_and_mul": 1, "none": 0}
    text = render(counts)
    assert text == "_C::rms_norm=3 _C::silu_and_mul=1 vllm/rms_norm=3"
    assert parse(text) == {k: v for k, v in counts.items() if v}
    assert render({}) == "" and parse("") == {}


def test_a_word_that_is_no_count_is_left_out_and_a_repeated_key_adds_up() -> None:
    assert parse("a::b=2 junk c=x =3 d::e= a::b=1") == {"a::b": 3}
    assert parse("a::b=c=4") == {"a::b=c": 4}  # the count is after the last "="


def test_a_key_s_namespace_is_torch_s_and_a_provider_s_has_none() -> None:
    assert namespace("_C::rms_norm") == "_C" and namespace("vllm::all_reduce") == "vllm"
    assert namespace("triton/rms_norm") == "" and namespace("") == ""


@pytest.fixture(scope="module")
def twice() -> object:
    """A real op outside torch's namespaces, as an engine registers one."""
    lib = torch.library.Library("harness_oprec", "DEF")
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda x: x * 2, "CPU")
    yield torch.ops.harness_oprec.twice
    del lib


def test_every_call_path_of_an_op_is_counted_and_torch_s_own_are_not(twice: object) -> None:
    assert ops.install() and ops.install()  # once: a second install wraps nothing twice
    handle = torch.ops.harness_oprec.twice  # taken before the calls, as a module does
    ops._CALLS.clear()
    x = torch.ones(3)
    handle(x)
    torch.ops.harness_oprec.twice(x)
    torch.ops.harness_oprec.twice.default(x)
    torch.ops.aten.add(x, x)  # torch's own: not the engine's
    torch.ops.aten.add.Tensor(x, x)
    assert dict(ops._CALLS) == {"harness_oprec::twice": 3}
    ops._CALLS.clear()


@pytest.mark.parametrize(("value", "on"), [(None, True), ("on", True), ("off", False),
                                           ("0", False), ("No", False), (" false ", False),
                                           ("1", True)])
def test_the_switch(monkeypatch: pytest.MonkeyPatch, value: str | None, on: bool) -> None:
    if value is None:
        monkeypatch.delenv(ops.SWITCH, raising=False)
    else:
        monkeypatch.setenv(ops.SWITCH, value)
    assert ops.enabled() is on


def test_the_surface_is_the_ops_registered_outside_torch_with_where(twice: object) -> None:
    import torch.distributed.fsdp  # noqa: F401  registers fsdp::, c10d_functional:: in Python

    surface = ops.engine_surface()
    # registered by this module (torch.library, as an engine's Python registers one)
    assert "test_op_record_format.py:" in surface["harness_oprec::twice"]
    where, line = surface["harness_oprec::twice"].rsplit(":", 1)
    assert Path(where).is_file() and line.isdigit()  # the file and line, nothing around them
    assert not any(name.startswith(("aten::", "prims::", "c10d::", "quantized::", "fsdp::",
                                    "c10d_functional::", "_dtensor::")) for name in surface)


@pytest.mark.parametrize(("site", "short"), [
    ("/tmp/vllm/csrc/cpu/torch_bindings.cpp:468", "csrc/cpu/torch_bindings.cpp:468"),
    ("/x/lib/python3.11/site-packages/vllm/utils/torch_utils.py:1065",
     "vllm/utils/torch_utils.py:1065"),
    ("/work/engine/ops.py:3", "/work/engine/ops.py:3"),
    ("csrc/cpu/shm.cpp:12", "csrc/cpu/shm.cpp:12"),  # the mark at the start
    ("site-packages/vllm/_ops.py:7", "vllm/_ops.py:7")])
def test_a_place_loses_the_machine_s_part(site: str, short: str) -> None:
    assert ops._short(site) == short


def test_a_surface_that_cannot_be_read_is_none_and_says_why(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def broken() -> dict[str, str]:
        raise RuntimeError("a provider's check raised")

    monkeypatch.setattr(ops, "engine_surface", broken)
    assert ops._surface_or_none() == {}
    assert capsys.readouterr().err == ("harness: the engine's ops were not read: RuntimeError: "
                                       "a provider's check raised\n")


def test_nothing_is_wrapped_in_a_process_without_torch() -> None:
    """A suite that never imports torch: install() finds no torch._ops and wraps nothing
    (it must not import torch for the suite: the CLI and torch-free suites stay quick)."""
    done = subprocess.run([sys.executable, "-c", "import sys; from harness.plugin import ops; "
                           "print(ops.install(), 'torch' in sys.modules)"],
                          capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["False", "False"]


def test_providers_loaded_without_the_op_spec_offer_nothing_yet() -> None:
    """refengine.providers imported alone (no provider loaded, its op spec not imported): no
    provider surface, and no error."""
    done = subprocess.run([sys.executable, "-c", "import sys, torch, refengine.providers; "
                           "from harness.plugin import ops; "
                           "print(ops._provider_surface(), 'refengine.ops.spec' in sys.modules)"],
                          capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["{}", "False"]
