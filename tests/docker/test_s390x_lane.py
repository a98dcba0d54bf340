"""The s390x lane under qemu-user: kernel_parity, fusion and e2e on big-endian.

``harness run --matrix s390x --docker`` in the image ci/make-s390x-image.sh bootstraps
(Debian's s390x torch), run on this x86 host through binfmt. CI runs the CI slice below
(the byte-order checks, the tokenizer cache primed here and read there, one fusion
case and the reference e2e model); the nightly pipeline runs the matrix's own tiers
(docs/s390x.md gives both, with their times).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from docker_helpers import ROOT
from test_run_docker import harness_run, need_image, outcomes, run_dir_of

# The e2e suite reads the s390x matrix's primed tokenizer cache (the shared one, as in
# CI); qemu runs the suites big-endian, as long as harness_run allows.
pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("shared_cache"),
              pytest.mark.timeout(3600)]

S390X_BASE = "harness-base-s390x:forky"
# The CI slice, as one -k over the three suites (names that occur in one suite only).
CI_SLICE = ("test_bf16_bits or test_fp8_codes or test_int8_lanes or test_int8_words"
            " or test_cache_primed_elsewhere or test_decoder_layer"
            " or (test_generate and llama and native)")


def _properties(junit: Path) -> dict[str, dict[str, str]]:
    """A case's properties by its name, from the JUnit file's sidecar (xunit2 JUnit has
    no per-case properties)."""
    props: dict[str, dict[str, str]] = {}
    for line in junit.with_name(junit.stem + ".partial.jsonl").read_text().splitlines():
        record = json.loads(line)
        props[record["nodeid"].rpartition("::")[2]] = record["properties"]
    return props


def test_s390x_three_suites_under_qemu(client: Any, tmp_path: Path) -> None:
    need_image(client, S390X_BASE, "ci/make-s390x-image.sh")
    reports = ROOT / "reports" / "dockertest" / tmp_path.name
    try:
        done = harness_run("--matrix", "s390x", "--docker", "--suite", "kernel_parity",
                           "--suite", "fusion", "--suite", "e2e", "-k", CI_SLICE,
                           reports=reports)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
        run_dir = run_dir_of(reports, "s390x")
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["matrix"]["name"] == "s390x" and manifest["runner"] == "docker"
        fingerprint = manifest["device_fingerprint"]
        assert fingerprint["arch"] == ["s390x"] and fingerprint["byteorder"] == "big"
        assert sorted(manifest["suites_planned"]) == ["e2e", "fusion", "kernel_parity"]
        got = outcomes(run_dir)
        passed = {t.split("::")[-1] for t, o in got.items() if o == "passed"}
        # The byte-order checks ran on big-endian for the providers the lane has.
        for name in ("test_bf16_bits[native]", "test_bf16_bits[torch]",
                     "test_fp8_codes[float8_e4m3fn-native]", "test_int8_lanes[native]",
                     "test_int8_words_follow_the_host_byte_order",
                     "test_cache_primed_elsewhere_gives_the_shared_ids",
                     "test_generate[native-llama]"):
            assert name in passed, f"{name}: {got}"
        # The tokenizer cache was primed here (x86, little-endian) and read there.
        tokenizer = _properties(run_dir / "junit" / "e2e.xml")[
            "test_cache_primed_elsewhere_gives_the_shared_ids"]
        assert tokenizer["tokenizer.read_on"] == "s390x/big", tokenizer
        assert tokenizer["tokenizer.cross_byte_order"] == "true", tokenizer
    finally:
        subprocess.run(["rm", "-rf", str(reports)], check=False)
