from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.matrix import load_matrix
from harness.results import layout
from harness.results.layout import Shard
from harness.run.plan import PlanOptions, plan_run


def options(**kw: object) -> PlanOptions:
    base: dict[str, object] = {"python": "py", "platform_spec": "m.json"}
    base.update(kw)
    return PlanOptions(**base)  # type: ignore[arg-type]


def test_plan_one_invocation_per_suite(tmp_path: Path) -> None:
    matrix = load_matrix("cpu")
    root = tmp_path / "repo"
    for suite in matrix.suites.values():
        (root / suite.path).mkdir(parents=True)
    invs = plan_run(matrix, tmp_path, root, options(workers=2, emulate=True))
    assert [i.suite for i in invs] == [s for s, v in matrix.suites.items() if v.enabled]
    first = invs[0]
    assert first.argv[:4] == ("py", "-m", "pytest", f"{root}/{matrix.suites[first.suite].path}")
    assert f"--rootdir={root}" in first.argv
    assert "-p" in first.argv and "harness.pytest_entry" in first.argv
    assert f"--junitxml={tmp_path / 'junit' / (first.suite + '.xml')}" in first.argv
    assert "--emulate" in first.argv
    assert first.partial.name == f"{first.suite}.partial.jsonl"


def test_suite_missing_from_the_project_is_the_shipped_one(tmp_path: Path) -> None:
    # An installed harness: a shipped matrix names suites/platform, the user's project
    # has none, the wheel has: the resolved matrix keeps the path relative (no install
    # folder in the matrix's hash or its run folder's matrix.json), and the plan finds it
    # under the shipped root, whose node ids (and the shipped known_failures ids) stay
    # relative to the shipped root; a project with a suites/platform of its own gets its own.
    import dataclasses

    from harness.matrix.suite_paths import resolve_one
    from harness.roots import shipped_root

    project = tmp_path / "project"
    project.mkdir()
    writer = shipped_root() / "matrices" / "base.yaml"
    resolved = resolve_one("suites/platform", writer=writer, root=project, file="base.yaml",
                           line=1, key="suites.platform.path")
    assert resolved == "suites/platform"

    matrix = load_matrix("cpu")
    suites = dict(matrix.suites)
    suites["platform"] = dataclasses.replace(suites["platform"], path=resolved)
    shipped = dataclasses.replace(matrix, suites=suites)
    (inv,) = plan_run(shipped, tmp_path / "run", project, options(suites=["platform"]))
    assert inv.argv[3] == str(shipped_root() / "suites" / "platform")
    assert f"--rootdir={shipped_root()}" in inv.argv

    (project / "suites" / "platform").mkdir(parents=True)  # the project's own comes first
    assert resolve_one("suites/platform", writer=writer, root=project, file="base.yaml",
                       line=1, key="suites.platform.path") == "suites/platform"
    (inv,) = plan_run(shipped, tmp_path / "run", project, options(suites=["platform"]))
    assert inv.argv[3] == str(project / "suites" / "platform")


def test_keyword_and_shard(tmp_path: Path) -> None:
    matrix = load_matrix("cpu")
    (inv,) = plan_run(
        matrix, tmp_path, Path("/r"),
        options(suites=["platform"], keyword="dtype", shard=Shard.parse("2/3"))
    )
    assert inv.junit.name == "platform-shard-2-of-3.xml"
    assert inv.argv[inv.argv.index("-k") + 1] == "(dtype)"
    assert "--harness-shard=2/3" in inv.argv


def test_unknown_suite_suggests() -> None:
    matrix = load_matrix("cpu")
    with pytest.raises(
        UsageError,
        match=r"--suite platfrom: cpu has no such suite "
        r"\(did you mean platform\?\)",
    ):
        plan_run(matrix, Path("/t"), Path("/r"), options(suites=["platfrom"]))


def test_junit_name() -> None:
    assert Path(layout.junit_rel("e2e", None)).name == "e2e.xml"
    assert Path(layout.junit_rel("e2e", "1/4")).name == "e2e-shard-1-of-4.xml"
