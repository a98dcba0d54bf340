"""Foreign JUnit files, written by hand from each producer's documented format."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.results.junit_read import case_ids, read_junit

DATA = Path(__file__).resolve().parents[1] / "data" / "junit"


def load(name: str) -> tuple[dict[str, tuple[str, int, str]], list[str], dict[str, object]]:
    warnings: list[str] = []
    cases, suites = read_junit(DATA / name, warnings.append)
    by_id = {c.nodeid: (c.status, c.reruns, c.message) for c in cases}
    assert len(by_id) == len(cases), "each logical test appears once"
    return by_id, warnings, dict(suites)


def statuses(name: str) -> dict[str, str]:
    return {k: v[0] for k, v in load(name)[0].items()}


def test_pytest_xunit1_statuses_properties_and_ids() -> None:
    warnings: list[str] = []
    cases, suites = read_junit(DATA / "pytest_xunit1.xml", warnings.append)
    assert warnings == []
    got = {c.nodeid: c.status for c in cases}
    parity = "suites/kernel_parity/test_rms_norm.py::test_rms_norm"
    fusion = "suites/fusion/test_passes.py::TestFusion"
    assert got == {
        f"{parity}[cuda-bfloat16-64]": "passed",
        f"{parity}[cuda-float16-64]": "failed",
        f"{fusion}::test_add_rms_norm": "passed",
        f"{fusion}::test_fp8_quant": "skipped",
        f"{fusion}::test_known_bad": "xfail",
        f"{fusion}::test_was_bad": "xpass",
        "suites/e2e/test_generate.py::test_greedy": "error",
    }
    first = cases[0]
    assert first.key == f"{parity}[bfloat16-64]"
    assert first.params == "bfloat16-64"
    assert first.properties["headroom"] == "0.78"
    assert first.properties["requires"] == "triton"
    assert cases[2].properties["fusion.add_rms_norm.found"] == "2"
    assert suites["pytest"].properties["matrix"] == "rocm"
    assert suites["pytest"].hostname == "agent-7"


def test_pytest_xunit2_without_file_attribute() -> None:
    assert statuses("pytest_xunit2.xml") == {
        "tests/test_math.py::test_add": "passed",
        "tests/test_math.py::TestDiv::test_div[2-0]": "failed",
        "tests/test_math.py::test_mul[cpu-float32]": "passed",
    }


def test_jenkins_style_classname_kept() -> None:
    assert statuses("jenkins.xml") == {
        "com.example.CalculatorTest::addsNumbers": "passed",
        "com.example.CalculatorTest::dividesByZero": "failed",
        "com.example.CalculatorTest::ignored": "skipped",
    }


def test_nested_testsuites_use_innermost_suite() -> None:
    cases, suites = read_junit(DATA / "nested.xml", pytest.fail)
    assert [(c.suite, c.nodeid, c.status) for c in cases] == [
        ("outer.inner_a", "inner_a::one", "passed"),
        ("outer.inner_a", "inner_a::two", "error"),
        ("outer.inner_b", "inner_b::three", "passed"),
    ]
    assert suites["outer"].properties == {"matrix": "cuda"}


def test_surefire_flaky_and_rerun_failures() -> None:
    got, warnings, _ = load("surefire_flaky.xml")
    assert warnings == []
    assert got["org.acme.NetTest::connectsEventually"][:2] == ("passed", 2)
    assert got["org.acme.NetTest::alwaysFails"][:2] == ("failed", 2)
    assert got["org.acme.NetTest::stable"][:2] == ("passed", 0)


def test_pytest_rerunfailures_elements_and_repeated_records() -> None:
    got, _, _ = load("pytest_rerunfailures.xml")
    assert got["test_net.py::test_flaky_then_pass"][:2] == ("passed", 1)
    # One <testcase> per attempt: the last attempt decides; a failed earlier one is a rerun.
    assert got["test_net.py::test_retry_record"] == ("passed", 1, "assert 0 == 1")
    assert got["test_net.py::test_always_fails"][:2] == ("failed", 0)


def test_gtest_status_and_result_attributes() -> None:
    assert statuses("gtest.xml") == {
        "GemmTest::Fp16Square": "passed",
        "GemmTest::Bf16Tall": "failed",
        "GemmTest::NeedsFp8": "skipped",
        "GemmTest::DISABLED_Huge": "skipped",
    }


def test_ctest_output_junit() -> None:
    assert statuses("ctest.xml") == {
        "unit_tokenizer": "passed",
        "unit_kv_cache": "failed",
        "gpu_smoke": "skipped",
        "cpu_only": "skipped",
    }


@pytest.mark.parametrize(
    ("name", "where", "kept"),
    [("truncated.xml", ":30:28: ", 1), ("malformed.xml", ":5:77: ", 2)],
)
def test_damaged_file_one_line_warning_and_keeps_earlier_cases(
    name: str, where: str, kept: int
) -> None:
    got, warnings, _ = load(name)
    assert len(warnings) == 1
    assert "\n" not in warnings[0]
    assert warnings[0].startswith(str(DATA / name) + where)
    assert len(got) == kept
    assert all(status == "passed" for status, _, _ in got.values())


def test_missing_file_warns() -> None:
    warnings: list[str] = []
    cases, _ = read_junit(DATA / "does-not-exist.xml", warnings.append)
    assert cases == [] and len(warnings) == 1 and "does-not-exist.xml" in warnings[0]


@pytest.mark.parametrize(
    ("classname", "name", "nodeid", "key"),
    [
        (
            "suites.k.test_a",
            "test_x[cuda:1-torch.bfloat16]",
            "suites/k/test_a.py::test_x[cuda-bfloat16]",
            "suites/k/test_a.py::test_x[bfloat16]",
        ),
        (
            "suites.k.test_a",
            "test_x[xpu-fp16-8]",
            "suites/k/test_a.py::test_x[xpu-float16-8]",
            "suites/k/test_a.py::test_x[float16-8]",
        ),
        (
            "test_ops.TestOpsCUDA",
            "test_add_cuda_float16",
            "test_ops.py::TestOpsCUDA::test_add_cuda_float16",
            "test_ops.py::TestOps::test_add_float16",
        ),
        (
            "test_ops",
            "test_cudagraph_capture",
            "test_ops.py::test_cudagraph_capture",
            "test_ops.py::test_cudagraph_capture",
        ),
    ],
)
def test_case_ids_strip_device_noise(classname: str, name: str, nodeid: str, key: str) -> None:
    got = case_ids(classname, name)
    assert got[:2] == (nodeid, key)


def test_text_messages_property_text_and_first_properties_only(tmp_path: Path) -> None:
    path = tmp_path / "odd.xml"
    path.write_text(
        '<?xml version="1.0"?>\n<testsuites><testsuite name="s" hostname="h" tests="x">'
        '<properties><property name="matrix">cpu</property></properties>'
        '<testcase classname="t.test_a" name="one" time="oops"><failure>first line\n'
        "second line</failure><system-out>noise</system-out></testcase>"
        '<testcase classname="t.test_a" name="two"><skipped><![CDATA[needs fp8]]></skipped>'
        '<properties><property name="op" value="gemm"/><property name="dtype">bf16<b/>x'
        '</property></properties><properties><property name="late" value="1"/></properties>'
        "</testcase>"
        '<testcase classname="t.test_a" name="three"><error message="">boom &amp; more'
        "</error></testcase>"
        "</testsuite></testsuites>\n"
    )
    cases, suites = read_junit(path, pytest.fail)
    got = {c.nodeid.rsplit("::", 1)[1]: c for c in cases}
    assert (got["one"].status, got["one"].message, got["one"].duration) == (
        "failed",
        "first line",
        0.0,
    )
    assert (got["two"].status, got["two"].message) == ("skipped", "needs fp8")
    assert got["two"].properties == {"op": "gemm", "dtype": "bf16"}
    assert (got["three"].status, got["three"].message) == ("error", "boom & more")
    assert suites["s"].properties == {"matrix": "cpu"}
    assert (suites["s"].hostname, suites["s"].tests) == ("h", 0)


def test_damage_inside_a_test_case_drops_only_that_case(tmp_path: Path) -> None:
    path = tmp_path / "cut.xml"
    path.write_text(
        '<testsuite name="s"><testcase classname="m" name="a"/>'
        '<testcase classname="m" name="b"><properties><property name="op" value="x"/>'
    )
    warnings: list[str] = []
    cases, _ = read_junit(path, warnings.append)
    assert [c.nodeid for c in cases] == ["m::a"]
    assert len(warnings) == 1 and warnings[0].startswith(f"{path}:1:")


_PROPERTY_SHAPES = (
    '<properties><property name="op" value="gemm"/><property name="dtype" value="bf16"/>'
    "</properties>",
    '<properties>\n    <property name="op" value="a"/>\n    <property name="n" value="1"/>\n'
    "  </properties>\n",
    "<properties/>",
    "<properties></properties>",
    '<properties><property name="op" value="v">text<b/>more</property></properties>',
    '<properties><property name="op">as text</property><property name="x" value="y"/>'
    "</properties>",
    '<properties><group><property name="deep" value="1"/></group>'
    '<property name="after" value="2"></property></properties>',
    '<properties><!-- note --><property name="" value="nameless"/>'
    '<property name="op" value="1"/><property name="op" value="2"/></properties>',
    '<properties><property name="op" value="first"/></properties>'
    '<properties><property name="op" value="second"/></properties>',
    '<properties><property value="v" name="reversed"/><property name="x" value="1" a="b"/>'
    '<property name="novalue"/><property name="later" value="2"/></properties>',
)
_AROUND = (
    ("", ""),
    ('<failure message="m">trace</failure>', ""),
    ("", "<failure>first line\nmore</failure><system-out>out</system-out>"),
    ("<skipped/>", '<error message="e"/>'),
)


def _expected_properties(case: ET.Element) -> dict[str, str] | None:
    """What the reader keeps, from the element tree: the first <properties>' property
    elements at any depth, a value attribute else the text before the first child."""
    block = case.find("properties")
    if block is None:
        return None
    found = {}
    for prop in block.iter("property"):
        name = prop.get("name")
        if name:
            value = prop.get("value")
            found[name] = value if value is not None else (prop.text or "")
    return found


@pytest.mark.parametrize("block", [1, 5, 13, 1 << 20])  # block boundaries everywhere
def test_property_shapes_read_as_the_element_tree_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    from harness.results import junit_read

    monkeypatch.setattr(junit_read, "_BLOCK", block)
    cases = []
    for index, (props, (before, after)) in enumerate(
        itertools.product(_PROPERTY_SHAPES, _AROUND)
    ):
        cases.append(
            f'<testcase classname="m.test_p" name="t{index}" time="0.5">'
            f"{before}{props}{after}</testcase>\n"
        )
    text = f'<testsuites><testsuite name="s">{"".join(cases)}</testsuite></testsuites>'
    path = tmp_path / "shapes.xml"
    path.write_text(text)
    got, _ = read_junit(path, pytest.fail)
    tree = ET.fromstring(text).iter("testcase")
    want = [(c.get("name"), _expected_properties(c) or {}) for c in tree]
    assert [(c.nodeid.rsplit("::", 1)[1], c.properties) for c in got] == want
    statuses = [c.status for c in got]
    assert statuses == [("passed", "failed", "failed", "error")[i % 4] for i in range(len(got))]
    assert [c.message for c in got][:4] == ["", "m", "first line", "e"]
