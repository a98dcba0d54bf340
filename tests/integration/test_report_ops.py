"""The nightly report's ops x platform view from real runs: the cpu lane (refengine's
providers are its engine) and the vllm-cpu lane (vLLM's ``_C`` library), each a `harness
run` of a kernel_parity selection, ingested; the report's page read in Chromium. What the
report says each lane exercised is what that lane's tests recorded in their sidecars (the
producer's file), and what it says each lane's engine offered is that run's surface."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cdp import find_chromium, load_page
from op_runs import offered_and_called

from harness.matrix import load_matrix

pytestmark = pytest.mark.timeout(2400)  # the vllm-cpu environment may be built first

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = find_chromium()
LANES = {"cpu": ("rms_norm and bfloat16", ["--python", "current"]),
         "vllm-cpu": ("vllm and rms_norm and bfloat16", [])}
# the cpu lane's second night runs more of the suite: its coverage's trend rises
SECOND_NIGHT = ("cpu", "(rms_norm or silu_and_mul) and bfloat16", ["--python", "current"])

PAGE = """JSON.stringify({
  coverage: [...document.querySelectorAll('#op-coverage tbody tr')].map(tr =>
    [...tr.cells].slice(0, 5).map(td => td.textContent.trim())),
  lanes: [...document.querySelectorAll('#ops-grid thead th')].map(th => th.textContent.trim()),
  rms: [...document.querySelectorAll('#ops-grid tbody tr')].filter(tr =>
    tr.cells[0].textContent.trim() === '_C::rms_norm').map(tr =>
    [...tr.cells].map(td => td.textContent.trim())),
  linked: !!document.querySelector('header a[href="#engine-ops"]'),
})"""


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path) -> dict[str, Any]:
    """Each lane's run, ingested into one history, and the report of it."""
    from harness.run.venvs import Environment

    if os.environ.get("HARNESS_SKIP_VLLM") == "1":
        pytest.skip("HARNESS_SKIP_VLLM=1")
    Environment.of(load_matrix("vllm-cpu"), emulate=False).python()
    top = tmp_path_factory.mktemp("ops-nights")
    env = dict(os.environ, HARNESS_HISTORY=str(top / "history.sqlite"))
    env.pop("HARNESS_OP_RECORD", None)
    runs: dict[str, list[Path]] = {}
    for lane, keyword, extra in [(k, *v) for k, v in LANES.items()] + [SECOND_NIGHT]:
        done = subprocess.run(
            [sys.executable, "-m", "harness", "run", "--matrix", lane, "--suite",
             "kernel_parity", "-k", keyword, "--reports", str(top / "reports"), *extra],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=2000, check=False)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        (run,) = set((top / "reports" / lane).iterdir()) - set(runs.get(lane, []))
        runs.setdefault(lane, []).append(run)
        ingest = subprocess.run([sys.executable, "-m", "harness", "history", "ingest",
                                 str(run)], cwd=ROOT, env=env, capture_output=True,
                                text=True, timeout=600, check=False)
        assert ingest.returncode == 0, ingest.stderr
    report = subprocess.run([sys.executable, "-m", "harness", "report", "nightly", "--out",
                             str(top / "report")], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=600, check=False)
    assert report.returncode == 0, report.stderr
    return {"runs": {lane: found[-1] for lane, found in runs.items()}, "nights": runs,
            "report": top / "report"}


def test_the_report_says_what_each_lane_s_tests_called_of_what_its_engine_offered(
        nights: dict[str, Any]) -> None:
    data = json.loads((nights["report"] / "report.json").read_text())
    coverage = {c["lane"]: c for c in data["op_coverage"]}
    assert set(coverage) == set(LANES), coverage
    for lane, run in nights["runs"].items():  # each lane's latest night
        offered, called = offered_and_called(run)
        shown = {op["name"] for op in data["ops"] if op["tests"].get(lane)}
        assert shown == called and called, (lane, shown, called)
        assert {op["name"] for op in data["ops"] if op["offered"].get(lane)} == offered
        assert coverage[lane]["offered"] == len(offered)
        assert coverage[lane]["exercised"] == len(offered & called)
        assert set(coverage[lane]["missed"]) == offered - called
    # vLLM's library on its lane, refengine's providers on both
    vllm = nights["runs"]["vllm-cpu"]
    offered = json.loads((vllm / "manifest.json").read_text())["device_fingerprint"]["engine_ops"]
    assert offered["_C::rms_norm"].startswith("csrc/cpu/") and "vllm/rms_norm" in offered
    assert not any(op.startswith("_C::") for op in coverage["cpu"]["missed"])
    # the trend: a share per night, each from that night's own files, oldest first
    for lane, found in nights["nights"].items():
        shares = []
        for run in found:
            offered, called = offered_and_called(run)
            shares.append(len(offered & called) / len(offered))
        assert [share for _, share in coverage[lane]["trend"]] == pytest.approx(shares)
    rising = [share for _, share in coverage["cpu"]["trend"]]
    assert len(rising) == 2 and rising[1] > rising[0], rising  # silu_and_mul's night added ops
    never = set(data["ops_not_exercised"])
    assert "_C::cpu_fused_moe" in never and "_C::rms_norm" not in never


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt install chromium)")
def test_the_page_shows_the_view(nights: dict[str, Any]) -> None:
    assert CHROMIUM is not None
    value, errors = load_page(CHROMIUM, nights["report"] / "report.html", PAGE)
    assert errors == []
    shown = json.loads(value)
    data = json.loads((nights["report"] / "report.json").read_text())
    expected = [[c["lane"], str(c["offered"]), str(c["exercised"]),
                 f"{100 * c['share']:.0f}%",
                 " → ".join(f"{100 * share:.0f}%" for _, share in c["trend"])]
                for c in data["op_coverage"]]
    assert shown["coverage"] == expected and shown["linked"]
    assert shown["lanes"] == ["op", "defined at", "cpu", "vllm-cpu"]
    ((name, where, on_cpu, on_vllm),) = shown["rms"]
    rms = next(op for op in data["ops"] if op["name"] == "_C::rms_norm")
    assert (name, on_cpu, on_vllm) == ("_C::rms_norm", "—", str(rms["tests"]["vllm-cpu"]))
    assert where.startswith("csrc/cpu/")
