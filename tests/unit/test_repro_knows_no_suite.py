"""harness/repro/ knows no suite from the inside: a standalone script is what a suite's
``standalone`` hook writes (docs/byo-suite.md, "A suite's hooks"), so no shipped suite's
test ids, module names or private names appear in harness's repro code, and a user's own
suite can offer a script as the shipped ones do (tests/integration/test_byo_standalone.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPRO = Path(__file__).resolve().parents[2] / "harness" / "repro"
# the shipped suites' names, test ids, case modules and private files
SUITE_NAMES = ("kernel_parity", "vllm_engine", "test_parity", "parity_cases", "parity_check",
               "parity_standalone", "test_greedy_tokens", "test_vllm_engine", "tiny_llama",
               "make_tiny_llama", "_vllm_greedy", "_transformers_greedy", "_prompt_ids",
               "loaded_library", "suites/")


@pytest.mark.parametrize("path", sorted(REPRO.glob("*.py")), ids=lambda p: p.name)
def test_repro_names_no_shipped_suite(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    found = [(name, text.count(name)) for name in SUITE_NAMES if name in text]
    assert not found, f"{path.name} knows a suite from the inside: {found}"


def test_the_scan_sees_a_suites_name() -> None:
    assert re.search("|".join(map(re.escape, SUITE_NAMES)),
                     "suites/kernel_parity/test_parity.py::test_parity[rms_norm-x]")
