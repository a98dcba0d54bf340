"""A nightly day from real runs only (ci/nightly_day.py), read back as a person would.

The script makes every lane with ``harness run`` as the README writes it, lays the run
folders out as the GitHub and the Buildkite nightly steps find them, runs the nightly
command each pipeline carries, checks the report's JSON against the JUnit files and
reruns the failing test with ``harness repro`` from another directory. Here: it exits 0
with no problem, and the page it wrote shows every lane in a real Chromium.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from cdp import find_chromium, load_page

from harness.results.run_folder import read_run

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = find_chromium()
MEMORY = ("peak_rss_mb", "rss_growth_mb")  # recorded on some cases only (plugin/memory.py)

LANES_SCRIPT = """JSON.stringify({
  lanes: [...document.querySelectorAll('#test-grid thead th.lane-col')].map(th => th.title),
  grid: [...new Set([...document.querySelectorAll('#suite-grid td[data-lane]')]
    .map(td => td.dataset.lane))],
})"""


def _docker_ready() -> bool:
    try:
        import docker

        client = docker.from_env(timeout=30)
        return any("s390x" in tag for image in client.images.list() for tag in image.tags)
    except Exception:
        return False


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path) -> dict[str, Any]:
    # the lanes' matrix venvs are built once per pins in the shared cache and reused
    out = tmp_path_factory.mktemp("nightly-day")
    args = [sys.executable, str(ROOT / "ci" / "nightly_day.py"), "--out", str(out)]
    if not _docker_ready():
        if os.environ.get("HARNESS_REQUIRE_DOCKER") == "1":
            pytest.fail("no Docker engine with the s390x image (ci/setup-host.sh)")
        args.append("--no-docker")
    done = subprocess.run(args, capture_output=True, text=True, timeout=3000, check=False)
    print(done.stdout[-5000:])
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    assert done.returncode == 0, "\n".join(summary["problems"]) or done.stderr[-3000:]
    return summary


def test_every_check_of_the_day_holds(day: dict[str, Any]) -> None:
    assert day["problems"] == []
    lanes = set(day["lanes"])
    assert {"cpu", "rocm (emulated)", "cuda (emulated)", "xpu (emulated)", "nightly-user",
            "nightly-crash", "nightly-cancel"} <= lanes
    assert len(day["lanes"]["cpu"]) == 2  # two shards, one night
    assert "zen" in lanes  # run, or recorded as skipped with the zen probe's line
    assert "s390x" in lanes or "s390x" in day["skipped"]
    assert {"vllm-cpu", "nightly-vllm"} <= lanes or "vllm-cpu" in day["skipped"]


def test_the_cancelled_run_kept_what_finished(day: dict[str, Any]) -> None:
    (run,) = day["lanes"]["nightly-cancel"]
    manifest = json.loads((Path(run) / "manifest.json").read_text())
    assert manifest["status"] == "cancelled" and manifest["exit_code"] == 143
    counts = manifest["suites"][0]["counts"]
    assert counts["passed"] >= 3


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt install chromium)")
@pytest.mark.parametrize("provider", ["github", "buildkite"])
def test_the_page_shows_every_lane(day: dict[str, Any], provider: str) -> None:
    assert CHROMIUM is not None
    page = Path(day["reports"][provider]) / "report.html"
    value, errors = load_page(CHROMIUM, page, LANES_SCRIPT)
    assert errors == []
    shown = json.loads(value)
    for lane in day["lanes"]:
        assert lane in shown["lanes"], (lane, shown["lanes"])
        assert lane in shown["grid"], (lane, shown["grid"])


def test_the_s390x_lane_ran_its_three_suites_big_endian(day: dict[str, Any]) -> None:
    """``harness run --matrix s390x --docker``, the CI slice of three suites (Debian's s390x
    torch in the image ci/make-s390x-image.sh bootstraps, run through binfmt): the byte-order
    checks passed big-endian for each provider the lane has, and the tokenizer cache primed
    here (x86, little-endian) was read there."""
    if "s390x" in day["skipped"]:
        pytest.skip(day["skipped"]["s390x"])
    (run,) = day["lanes"]["s390x"]
    manifest = json.loads((Path(run) / "manifest.json").read_text())
    assert manifest["matrix"]["name"] == "s390x" and manifest["runner"] == "docker"
    assert sorted(manifest["suites_planned"]) == ["e2e", "fusion", "kernel_parity"]
    ran = {s["suite"]: s["status"] for s in manifest["suites"]}
    assert set(ran) == {"kernel_parity", "fusion", "e2e"}, ran
    assert set(ran.values()) == {"passed"}, ran
    fingerprint = manifest["device_fingerprint"]
    assert fingerprint["arch"] == ["s390x"] and fingerprint["byteorder"] == "big"
    folder = read_run(Path(run), print)
    passed = {c.nodeid.rpartition("::")[2] for c in folder.cases.values()
              if c.status == "passed"}
    for name in ("test_bf16_bits[native]", "test_bf16_bits[torch]",
                 "test_fp8_codes[float8_e4m3fn-native]", "test_int8_lanes[native]",
                 "test_int8_words_follow_the_host_byte_order", "test_decoder_layer",
                 "test_cache_primed_elsewhere_gives_the_shared_ids",
                 "test_generate[native-llama]"):
        assert name in passed, (name, sorted(passed))
    records = [json.loads(line) for line in
               (Path(run) / "junit" / "e2e.partial.jsonl").read_text().splitlines()]
    tokenizer = next(r["properties"] for r in records
                     if "test_cache_primed_elsewhere" in r["nodeid"])
    assert tokenizer["tokenizer.read_on"] == "s390x/big", tokenizer
    assert tokenizer["tokenizer.primed_on"] != "s390x/big", tokenizer
    assert tokenizer["tokenizer.cross_byte_order"] == "true", tokenizer


def test_the_scale_bench_writes_cases_as_harness_run_does(day: dict[str, Any]) -> None:
    """bench/report_scale.py times ingest on JUnit and sidecars it writes itself: its cases
    must have the shape real runs wrote (what ingest parses per case): plain xunit2
    <testcase> elements, and in the sidecar the properties the plugin records. The parity
    cases come from the s390x lane, the day's one lane that runs them."""
    if "s390x" in day["skipped"]:
        pytest.skip(day["skipped"]["s390x"])
    path = ROOT / "bench" / "report_scale.py"
    spec = importlib.util.spec_from_file_location("report_scale", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    attributes, children, parity, recorded = set(), set(), [], set()
    for runs in day["lanes"].values():
        for run in runs:
            for junit in sorted((Path(run) / "junit").glob("*.xml")):
                for case in ElementTree.parse(junit).iter("testcase"):
                    attributes.add(tuple(sorted(case.attrib)))
                    children.update(child.tag for child in case)
                sidecar = junit.with_name(junit.stem + ".partial.jsonl")
                for line in sidecar.read_text().splitlines() if sidecar.is_file() else ():
                    record = json.loads(line)
                    # memory: the peak on the cases that raised their file's peak in their
                    # process (the bench: every 50th), the growth on those that took their
                    # process 10 MB or more above its start (the bench: every 10th)
                    names = [n for n in record["properties"] if n not in MEMORY]
                    recorded.update(record["properties"])
                    plain = "known_failure" not in names and record["outcome"] == "passed"
                    if "::test_parity[" in record["nodeid"] and plain:
                        parity.append(names)
    assert attributes == {("classname", "name", "time")}
    assert children <= {"failure", "error", "skipped", "system-out", "system-err"}
    # no platform on every case (the testsuite's matrix says it), what the bench writes
    assert recorded and "platform" not in recorded
    rng = random.Random(0)
    bench_case, bench_line = bench.write_case(
        "suites/kernel_parity/test_parity.py::x", 0.1, 0.5, 1,
        bench.case_properties("kernel_parity", 1, "float32", rng))
    case = ElementTree.fromstring(bench_case)
    assert tuple(sorted(case.attrib)) == ("classname", "name", "time") and not list(case)
    want = [n for n in json.loads(bench_line)["properties"] if n not in MEMORY]
    timed_line = bench.write_case("suites/kernel_parity/test_parity.py::x", 0.1, 0.5, 4,
                                  bench.case_properties("kernel_parity", 4, "float32", rng))[1]
    timed = [n for n in json.loads(timed_line)["properties"] if n not in MEMORY]
    untimed_line = bench.write_case("suites/kernel_parity/test_parity.py::x", 0.1, 0.5, 2,
                                    bench.case_properties("kernel_parity", 2, "float32", rng))[1]
    untimed = [n for n in json.loads(untimed_line)["properties"] if n not in MEMORY]
    assert "peak_rss_mb" in recorded  # real runs record it, as the bench writes it
    growth = bench.write_case("suites/kernel_parity/test_parity.py::x", 0.1, 0.5, 10,
                              bench.case_properties("kernel_parity", 10, "float32", rng))[1]
    assert ("rss_growth_mb" in recorded) == ("rss_growth_mb" in json.loads(growth)["properties"])
    assert parity
    # a parity case's names as the bench writes them: the speed tier's case with its timing,
    # or with why it has none
    assert all(names in (want, timed, untimed) for names in parity), (want, timed, parity[:3])
    assert want in parity and timed in parity
