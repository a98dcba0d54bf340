"""refengine/providers/vllm_library.py ``_load_elsewhere``: a kernel library that may kill
its loader is loaded first in a forked child (on the same CPU as this process, emulated or
not), and how that child ended is the provider's reason. Each ending, through a real fork."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from refengine.providers import vllm_library  # noqa: E402


def test_a_library_that_loads_is_no_reason() -> None:
    c10 = Path(torch.__file__).parent / "lib" / "libc10.so"  # a real library, loadable
    assert vllm_library._load_elsewhere(c10) == ""


def test_a_library_that_cannot_be_loaded_says_why_in_its_own_words(tmp_path: Path) -> None:
    bad = tmp_path / "_C_AVX2.abi3.so"
    bad.write_text("not a shared object\n")
    why = vllm_library._load_elsewhere(bad)
    assert why.startswith("loading _C_AVX2.abi3.so on a CPU without AVX2 (torch: ")
    assert "its process exit 1: OSError: " in why and "_C_AVX2.abi3.so" in why.split(": ", 2)[2]


def test_a_load_that_kills_its_process_names_the_signal(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    # what an AVX2 library does on a CPU without AVX2: SIGILL, in the child only
    monkeypatch.setattr(torch.ops, "load_library",
                        lambda path: os.kill(os.getpid(), signal.SIGILL))
    why = vllm_library._load_elsewhere(tmp_path / "_C_AVX2.abi3.so")
    assert why.endswith(": its process killed by SIGILL: no output"), why


def test_a_load_that_hangs_is_killed_at_its_deadline(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    monkeypatch.setattr(torch.ops, "load_library", lambda path: time.sleep(60))
    started = time.monotonic()
    why = vllm_library._load_elsewhere(tmp_path / "_C_AVX2.abi3.so", timeout_s=0.5)
    assert time.monotonic() - started < 10
    assert why.endswith(": its process did not end in 0.5 s (killed)"), why
