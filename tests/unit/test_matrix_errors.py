"""Every kind of bad matrix input: one exact line per problem, exit code 2, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import cli
from harness.roots import project_root

ROOT = project_root()
DATA = ROOT / "tests" / "data" / "matrices"
REL = "tests/data/matrices"


@pytest.fixture(autouse=True)
def _only_matrix_command(monkeypatch: pytest.MonkeyPatch) -> None:
    # The matrix command alone: these tests must not depend on other command modules.
    monkeypatch.setattr(cli, "COMMANDS", ("matrix",))
    monkeypatch.delenv("HARNESS_ROOT", raising=False)


def validate(capsys: pytest.CaptureFixture[str], *files: str | Path) -> tuple[int, list[str]]:
    code = cli.main(["matrix", "validate", *(str(f) for f in files)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, [line.removeprefix("harness: error: ") for line in err.splitlines()]


def check(capsys: pytest.CaptureFixture[str], name: str, *expected: str) -> None:
    code, lines = validate(capsys, DATA / name)
    assert (code, lines) == (2, list(expected))


def test_yaml_syntax_error_gives_line_and_column(capsys: pytest.CaptureFixture[str]) -> None:
    check(
        capsys,
        "syntax_error.yaml",
        f"{REL}/syntax_error.yaml:4: YAML syntax error: expected ',' or ']', but got ':' "
        "(column 6)",
    )


def test_unknown_key_suggests_the_nearest(capsys: pytest.CaptureFixture[str]) -> None:
    check(
        capsys,
        "unknown_key.yaml",
        f"{REL}/unknown_key.yaml:4: runtime.shm_sise: unknown key (did you mean shm_size?)",
    )


def test_wrong_type_says_what_was_expected(capsys: pytest.CaptureFixture[str]) -> None:
    check(
        capsys,
        "wrong_type.yaml",
        f"{REL}/wrong_type.yaml:3: runtime.shm_size: expected a string like '16g', got a list",
    )


def test_missing_required_keys(capsys: pytest.CaptureFixture[str]) -> None:
    check(
        capsys,
        "missing_required.yaml",
        f"{REL}/missing_required.yaml: hardware: missing required key",
        f"{REL}/missing_required.yaml:9: known_failures[0].reason: missing required key",
    )


def test_missing_parent_suggests_a_shipped_matrix(capsys: pytest.CaptureFixture[str]) -> None:
    check(
        capsys,
        "extends_missing.yaml",
        f"{REL}/extends_missing.yaml:1: extends: no such file cpuu.yaml (did you mean cpu.yaml?)",
    )


def test_extends_cycle_names_the_loop(capsys: pytest.CaptureFixture[str]) -> None:
    check(
        capsys,
        "cycle_a.yaml",
        f"{REL}/cycle_b.yaml:1: extends: cycle: {REL}/cycle_a.yaml -> {REL}/cycle_b.yaml -> "
        f"{REL}/cycle_a.yaml",
    )


def test_unknown_capability_anywhere(capsys: pytest.CaptureFixture[str]) -> None:
    check(
        capsys,
        "unknown_capability.yaml",
        f"{REL}/unknown_capability.yaml:3: capabilities.provides[11]: unknown capability "
        "'fp8_e4m3fnz' (did you mean fp8_e4m3fnuz?)",
        f"{REL}/unknown_capability.yaml:6: probe.expect.capabilities[0]: unknown capability "
        "'avx512bf16' (did you mean avx512_bf16?)",
        f"{REL}/unknown_capability.yaml:10: known_failures[0].requires[0]: unknown capability "
        "'cuda_graph' (did you mean cuda_graphs?)",
    )


def test_duplicate_key(capsys: pytest.CaptureFixture[str]) -> None:
    check(
        capsys,
        "duplicate_key.yaml",
        f"{REL}/duplicate_key.yaml:5: runtime.shm_size: duplicate key (first at line 3)",
    )


def test_unsafe_tag_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    check(
        capsys,
        "unsafe_tag.yaml",
        f"{REL}/unsafe_tag.yaml:2: description: YAML tag !!python/object/apply:os.system is "
        "not allowed (plain YAML types only)",
    )


def test_alias_bomb_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    check(
        capsys,
        "alias_bomb.yaml",
        f"{REL}/alias_bomb.yaml:6: YAML expands to more than 100,000 nodes (alias bomb?)",
    )


def test_oversized_file_is_refused_before_parsing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("extends: cpu.yaml\n" + "# padding\n" * 120_000)
    code, lines = validate(capsys, big)
    assert (code, lines) == (2, [f"{big}: file is 1.1 MiB, over the 1 MiB limit"])


def test_paths_must_stay_in_the_repository(capsys: pytest.CaptureFixture[str]) -> None:
    check(
        capsys,
        "path_escape.yaml",
        f"{REL}/path_escape.yaml:3: image.dockerfile: path escapes the repository: "
        "'../../etc/Dockerfile'",
        f"{REL}/path_escape.yaml:7: image.downloads[0].dest: must be relative to the "
        "repository, got '/tmp/tool.deb'",
        f"{REL}/path_escape.yaml:9: suites.e2e.path: expected a path, got an empty string",
    )


def test_expires_must_be_a_date(capsys: pytest.CaptureFixture[str]) -> None:
    check(
        capsys,
        "bad_expires.yaml",
        f"{REL}/bad_expires.yaml:5: known_failures[0].expires: expected a date like "
        "2026-06-30, got 'next week'",
    )


def test_impossible_date(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "date.yaml"
    bad.write_text(
        "extends: cpu.yaml\nknown_failures:\n  - {id: x, reason: y, expires: 2026-13-45}\n"
    )
    code, lines = validate(capsys, bad)
    assert (code, lines) == (
        2,
        [f"{bad}:3: invalid date '2026-13-45' (month must be in 1..12) (column 33)"],
    )


def test_unknown_kernel_provider(capsys: pytest.CaptureFixture[str]) -> None:
    check(
        capsys,
        "unknown_provider.yaml",
        f"{REL}/unknown_provider.yaml:3: kernels.linear[0]: unknown kernel provider 'zentorh' "
        "(did you mean zentorch?)",
    )


def test_provider_needs_its_capability(capsys: pytest.CaptureFixture[str]) -> None:
    check(
        capsys,
        "provider_without_capability.yaml",
        f"{REL}/provider_without_capability.yaml:3: kernels.linear[0]: provider zentorch "
        "needs capability zentorch in capabilities.provides",
    )


def test_unknown_dtype(capsys: pytest.CaptureFixture[str]) -> None:
    check(
        capsys,
        "unknown_dtype.yaml",
        f"{REL}/unknown_dtype.yaml:2: dtypes[2]: unknown dtype 'float33' (did you mean float32?)",
    )


def test_fp8_flavour_must_be_a_torch_dtype(capsys: pytest.CaptureFixture[str]) -> None:
    check(
        capsys,
        "bad_fp8.yaml",
        f"{REL}/bad_fp8.yaml:3: fp8.e4m3: unknown fp8 e4m3 dtype 'float8_e4m3' "
        "(did you mean float8_e4m3fn?)",
    )


def test_several_problems_one_line_each_in_file_order(capsys: pytest.CaptureFixture[str]) -> None:
    check(
        capsys,
        "several_problems.yaml",
        f"{REL}/several_problems.yaml:2: family: unknown family 'cuad' (did you mean cuda?)",
        f"{REL}/several_problems.yaml:4: runtime.network: expected one of none, host, bridge, "
        "got false (quote it: YAML reads on/off/yes/no as booleans)",
        f"{REL}/several_problems.yaml:5: runtime.test_timeout_s: expected an integer, "
        "got string '600'",
        f"{REL}/several_problems.yaml:7: ci.shards: must be at least 1, got 0",
    )


def test_append_to_a_mapping_is_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "append.yaml"
    bad.write_text("extends: cpu.yaml\nruntime:\n  env+: [A]\n")
    code, lines = validate(capsys, bad)
    assert (code, lines) == (
        2,
        [f"{bad}:3: runtime.env+: appends to a list, but the inherited env is a mapping"],
    )


def test_yaml_merge_keys_are_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "merge.yaml"
    bad.write_text("extends: cpu.yaml\nx: &x {ipc: host}\nruntime:\n  <<: *x\n")
    code, lines = validate(capsys, bad)
    assert code == 2
    assert lines == [f"{bad}:4: runtime: YAML merge keys (<<) are not supported; use extends"]


def test_loader_only_keys_are_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "loader.yaml"
    bad.write_text("extends: cpu.yaml\nfile: elsewhere.yaml\n")
    code, lines = validate(capsys, bad)
    assert (code, lines) == (
        2,
        [f"{bad}:2: file: set by the loader; remove it from the matrix file"],
    )


def test_unknown_matrix_name(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["matrix", "show", "rocn"])
    err = capsys.readouterr().err.splitlines()
    assert code == 2
    assert len(err) == 1
    assert err[0].startswith(
        "harness: error: no matrix named 'rocn' (did you mean rocm?); available: cpu, cpu-v3, "
        "cuda, "
    )


def test_good_and_bad_files_together(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        ["matrix", "validate", str(DATA / "good_custom.yaml"), str(DATA / "unknown_dtype.yaml")]
    )
    out, err = capsys.readouterr()
    assert code == 2
    assert out == f"ok {REL}/good_custom.yaml\n"
    assert err.count("\n") == 1
