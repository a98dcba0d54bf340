"""The pytest plugin end to end, through pytester (in-process pytest runs)."""

from __future__ import annotations

import datetime
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.roots import project_root

# Imported once here: pytester restores sys.modules after each in-process run, and
# importing torch a second time in one process crashes it.
torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def write_matrix(pytester: pytest.Pytester, known_failures: str = "[]", base: str = "cpu") -> str:
    text = f"extends: {project_root() / 'matrices' / (base + '.yaml')}\nname: test-{base}\n"
    text += f"known_failures: {known_failures}\n"
    path = pytester.path / f"test-{base}.yaml"
    path.write_text(text)
    return str(path)


def test_requires_skips_with_reason_naming_capability_and_platform(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.requires("fp8_e4m3fnuz")
        def test_needs_fnuz():
            pass
        @pytest.mark.requires("fp8")
        def test_needs_fp8():
            pass
    """)
    result = pytester.runpytest("--platform", "cpu", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*cpu does not provide fp8_e4m3fnuz*"])


def test_unknown_capability_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.requires("fp8_e4m3fnz")
        def test_typo():
            pass
    """)
    result = pytester.runpytest("--platform", "cpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*test_typo: requires: unknown capability 'fp8_e4m3fnz' (did you mean fp8_e4m3fnuz?)*"]
    )


def test_emulate_skips_hardware_only_capabilities(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.requires("hipblaslt")
        def test_vendor_blas():
            pass
        @pytest.mark.requires("fp8_e4m3fnuz")
        def test_fp8_flavour(platform, device):
            assert platform.device == "cpu" and str(device) == "cpu"
    """)
    result = pytester.runpytest("--platform", "rocm", "--emulate", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*rocm: hipblaslt needs hardware (emulated on the CPU)*"])


def test_known_failures_strict_xfail_with_normalised_ids(pytester: pytest.Pytester) -> None:
    spec = write_matrix(
        pytester,
        """
  - id: "test_kf.py::test_broken[bfloat16]"
    reason: rounding differs
    action: xfail
  - id: "test_kf.py::test_fixed[*]"
    reason: was broken
    action: xfail
  - id: "test_kf.py::test_flaky"
    reason: flaky on this runner
    action: quarantine
  - id: "test_kf.py::test_skipme"
    reason: hangs
    action: skip
""",
    )
    pytester.makepyfile(
        test_kf="""
        import pytest
        @pytest.mark.parametrize("dt", ["bf16"])
        def test_broken(dt):
            assert False
        @pytest.mark.parametrize("dt", ["float32"])
        def test_fixed(dt):
            pass
        def test_flaky():
            assert False
        def test_skipme():
            assert False
    """
    )
    result = pytester.runpytest("--platform", spec, "-rxXs")
    # test_fixed now passes: a strict xfail turns that into a failure, so the entry goes.
    result.assert_outcomes(xfailed=2, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*XPASS(strict)*was broken*"])


def test_expired_known_failure_fails_the_run_loudly(pytester: pytest.Pytester) -> None:
    past = datetime.date.today() - datetime.timedelta(days=1)
    spec = write_matrix(
        pytester,
        f"""
  - id: "test_old.py::test_old"
    reason: old bug
    action: xfail
    expires: {past.isoformat()}
""",
    )
    pytester.makepyfile(
        test_old="""
        def test_old():
            assert False
    """
    )
    result = pytester.runpytest("--platform", spec)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            f"*known_failures entry expired on {past}: old bug*",
            f"*EXPIRED KNOWN FAILURE ({past})*",
        ]
    )


def test_junit_properties_per_suite_and_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest
        @pytest.mark.requires("fp8")
        def test_props(record_property, tolerance):
            tol = tolerance("float32")
            record_property("atol", tol.atol)
            assert (tol.atol, tol.rtol) == (1e-5, 1.3e-6)
    """)
    junit = pytester.path / "out.xml"
    result = pytester.runpytest(
        "--platform", "cpu", f"--junitxml={junit}", "-o", "junit_family=xunit1", "--harness-seed=7"
    )
    result.assert_outcomes(passed=1)
    root = ET.parse(junit).getroot()
    suite_props = {p.get("name"): p.get("value") for p in root.find("testsuite/properties")}  # type: ignore[union-attr]
    assert suite_props["matrix"] == "cpu" and suite_props["seed"] == "7"
    assert len(suite_props["matrix_hash"] or "") == 64
    case_props = [
        (p.get("name"), p.get("value"))
        for p in root.iter("property")
        if p not in root.find("testsuite/properties")
    ]  # type: ignore[operator]
    # the matrix is the testsuite's; no case repeats it
    assert ("requires", "fp8") in case_props and "platform" not in dict(case_props)


def test_plugin_is_inert_without_platform(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        def test_plain():
            pass
        def test_wants_platform(platform):
            pass
    """)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*no platform given*"])


def test_partial_results_file(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile("""
        def test_a():
            pass
        def test_b():
            assert 0
    """)
    partial = tmp_path / "p.jsonl"
    pytester.runpytest(f"--harness-partial={partial}")
    lines = partial.read_text().splitlines()
    assert len(lines) == 2 and '"outcome": "failed"' in lines[1]


def test_known_failure_requires_and_unmatched_warning(pytester: pytest.Pytester) -> None:
    spec = write_matrix(pytester, """
  - id: "test_req.py::test_a"
    reason: only where hipblaslt exists
    action: xfail
    requires: [hipblaslt]
  - id: "test_req.py::test_gone"
    reason: this test was renamed
    action: xfail
  - id: "suites/other/test_x.py::test_y"
    reason: another suite's entry
    action: xfail
""", base="rocm")
    pytester.makepyfile(test_req="""
        def test_a():
            pass
    """)
    result = pytester.runpytest("--platform", spec, "--emulate")
    # hipblaslt needs hardware: the entry does not apply emulated, so test_a just passes.
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*known failure matched no test here (rootdir *): test_req.py::test_gone*"]
    )
    assert "suites/other/test_x.py" not in result.stdout.str()


def test_a_module_that_fails_to_import_is_an_error_case_and_the_rest_run(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_ok="def test_ok():\n    pass\n",
        test_broken="import no_such_module_here\n\ndef test_never():\n    pass\n",
    )
    junit = pytester.path / "out.xml"
    result = pytester.runpytest("--platform", "cpu", f"--junitxml={junit}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # not 2: the other module ran
    result.assert_outcomes(passed=1, errors=1)
    (case,) = [c for c in ET.parse(junit).getroot().iter("testcase") if c.find("error") is not None]
    error = case.find("error")
    assert error is not None and error.get("message") == "collection failure"
    assert "no_such_module_here" in (error.text or "")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["nodeid"] == "test_broken.py"  # the module's node id, as pytest reports it
    # Without --platform the plugin changes nothing: pytest stops at the error.
    assert pytester.runpytest().ret == pytest.ExitCode.INTERRUPTED


def test_an_imported_test_helper_is_not_collected(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        engine_utils="def test_helper(model):\n    return model\n",
        test_uses="from engine_utils import test_helper\n\ndef test_x():\n"
        "    assert test_helper(1) == 1\n",
        test_shared="def test_shared():\n    pass\n",
        test_reuses="from test_shared import test_shared\n",
    )
    result = pytester.runpytest("--platform", "cpu", "-v", "-p", "no:cacheprovider")
    # The helper is not a test; a test imported from another test module still is.
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*test_reuses.py::test_shared PASSED*",
            "harness: not collected: 1 test_* function(s) imported from helper modules, "
            "e.g. test_uses.py::test_helper (from engine_utils)",
        ]
    )
    assert pytester.runpytest("-p", "no:cacheprovider").ret == pytest.ExitCode.TESTS_FAILED


def test_known_failure_with_a_signature_fails_a_failure_outside_it(
    pytester: pytest.Pytester,
) -> None:
    # One entry per action; the same signature: a tolerance failure with headroom <= 2.
    expect = ("{raises: AssertionError, match: 'out of tolerance', "
              "headroom: {min: 1.0, max: 2.0}}")
    spec = write_matrix(
        pytester,
        f"""
  - id: "test_sig.py::test_kernel[*]"
    reason: bf16 rounding, headroom 1.5
    action: xfail
    expect: {expect}
  - id: "test_sig.py::test_flaky[*]"
    reason: intermittent, headroom up to 1.5
    action: quarantine
    expect: {expect}
""",
    )
    pytester.makepyfile(test_sig="""
        import pytest
        CASES = {"as-known": (1.5, "out of tolerance", AssertionError),
                 "new-bug-far-out": (40.0, "out of tolerance", AssertionError),
                 "another-error": (1.5, "index 7 out of range", IndexError)}
        @pytest.mark.parametrize("case", CASES)
        def test_kernel(case, record_property):
            headroom, message, kind = CASES[case]
            record_property("headroom", f"{headroom:g}")
            raise kind(message)
        @pytest.mark.parametrize("case", ["as-known", "new-bug-far-out"])
        def test_flaky(case, record_property):
            headroom = {"as-known": 1.5, "new-bug-far-out": 40.0}[case]
            record_property("headroom", f"{headroom:g}")
            raise AssertionError("out of tolerance")
    """)
    result = pytester.runpytest("--platform", spec, "-rxXf")
    result.assert_outcomes(failed=3, xfailed=2)
    result.stdout.fnmatch_lines([
        "*_ test_kernel?new-bug-far-out? _*",
        "known failure test_sig.py::test_kernel?*? ?*test-cpu.yaml:4? expects another failure: "
        "headroom in ?1.0, 2.0?, found 40",
        "the failure: AssertionError: out of tolerance",
        "*_ test_kernel?another-error? _*",
        "*expects another failure: raises AssertionError, found IndexError; message matching "
        "'out of tolerance', found 'index 7 out of range'",
        "*_ test_flaky?new-bug-far-out? _*",
        "*test-cpu.yaml:8? expects another failure: headroom in ?1.0, 2.0?, found 40",
    ])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_known_failure_expect_is_checked_in_setup_and_teardown(
    pytester: pytest.Pytester,
) -> None:
    # pytest turns an error in a fixture of a known failure into an xfail; the signature
    # must hold there as in the call (once only call-phase failures were checked).
    spec = write_matrix(
        pytester,
        """
  - id: "test_phases.py::test_*"
    reason: the kernel is out of tolerance
    action: xfail
    expect: {raises: AssertionError, match: 'out of tolerance'}
""",
    )
    pytester.makepyfile(test_phases="""
        import pytest
        @pytest.fixture
        def broken_setup():
            raise RuntimeError("device lost in setup")
        @pytest.fixture
        def known_setup():
            raise AssertionError("out of tolerance in setup")
        @pytest.fixture
        def broken_teardown():
            yield
            raise RuntimeError("device lost in teardown")
        def test_setup_error(broken_setup):
            pass
        def test_setup_as_known(known_setup):
            pass
        def test_teardown_error(broken_teardown):
            raise AssertionError("out of tolerance")
        def test_call_as_known():
            raise AssertionError("out of tolerance")
    """)
    result = pytester.runpytest("--platform", spec, "-rxXfE")
    # the call of test_teardown_error fits (an xfail); its teardown does not (an error)
    result.assert_outcomes(errors=2, xfailed=3)
    result.stdout.fnmatch_lines([
        "*ERROR at setup of test_setup_error*",
        "*expects another failure: raises AssertionError, found RuntimeError; message "
        "matching 'out of tolerance', found 'device lost in setup'",
        "the failure (in setup): RuntimeError: device lost in setup",
        "*ERROR at teardown of test_teardown_error*",
        "the failure (in teardown): RuntimeError: device lost in teardown",
    ])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
