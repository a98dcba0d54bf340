"""The doctor's device check: one entry per GPU probe kind (platform/doctor.py DEVICE_FILES)."""

from __future__ import annotations

from harness.platform.doctor import DEVICE_FILES, device_present
from harness.results.facts import PROBE_KINDS


def test_every_gpu_probe_kind_has_a_device_to_look_for_and_no_other_kind_does() -> None:
    gpu_kinds = {kind for kind, record in PROBE_KINDS.items() if record.gpu}
    assert set(DEVICE_FILES) == gpu_kinds


def test_a_kind_without_a_device_is_present_and_each_gpu_kind_answers_in_words() -> None:
    assert device_present("lscpu") == (True, "no device to probe")
    for kind in DEVICE_FILES:
        ok, detail = device_present(kind)
        assert isinstance(ok, bool) and detail and "\n" not in detail
