"""Mutation score per op and provider: how many small code changes the suites catch; and
per harness module whose bugs would make a run lie (``harness:*``: its unit tests).

Runs cosmic-ray (PyPI ``cosmic-ray``) over the code one op's provider kernel is made of,
with that op's parity tests (or the fusion suite, for a fusion pass) as the test
command, and prints killed / survived / equivalent per target and the score
killed / (mutants - equivalent), side by side with the 90% target.

Why cosmic-ray: it writes each mutant to the file on disk and runs an ordinary test
command in a fresh process, so it mutates anything Python can read back: plain
providers, the fusion passes, and Triton kernels, which ``@triton.jit`` re-parses from
their source file (mutmut 3 rewrites functions into trampolines, which Triton's parser
cannot read, and skips decorated functions). A line-range filter scopes each run to the
functions of one op, and an operator filter keeps a realistic subset (arithmetic swaps,
comparison boundaries, constants, booleans, loops): bit-shift, modulo and power
replacements of every operator multiply the count without modelling real kernel bugs.

The mutants are written into a copy of the checkout (``--workdir``), never into it.
A surviving mutant that is equivalent (the code computes the same thing) is listed in
bench/mutation_equivalent.txt as ``target<TAB>line<TAB>operator<TAB>occurrence<TAB>why``;
docs/mutation.md explains the survivors.

    python bench/mutation.py [--target triton:rms_norm ...] [--timeout 120] [--list]

It is CPU-heavy (one pytest process per mutant, ~5-25 s each on a 2-core host):
run one target at a time where the host is shared.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENT = ROOT / "bench" / "mutation_equivalent.txt"
TARGET_SCORE = 0.90


@dataclass(frozen=True)
class Target:
    """One op of one provider: the module, the functions its kernel is made of, the tests."""

    module: str
    functions: tuple[str, ...]
    tests: tuple[str, ...]  # pytest arguments after the interpreter's ``-m pytest``
    # more pytest runs (another platform, the e2e suite), each after the one before passed
    also: tuple[tuple[str, ...], ...] = ()


def _parity(op_k: str, matrix: str = "cpu", emulate: bool = False) -> tuple[str, ...]:
    """The op's parity cases for the provider, plus the op's coverage test (which fails
    when a checked provider declines a case declines.py does not declare)."""
    extra = ("--emulate",) if emulate else ()
    op = op_k.split()[0]
    # the coverage test first: it is cheap and kills a supports() mutant before any case
    return ("suites/kernel_parity/test_coverage.py", "suites/kernel_parity/test_parity.py",
            "--platform", matrix, *extra, "-k", f"({op_k}) or (every and {op})")


TARGETS: dict[str, Target] = {
    # the cpu matrix's triton provider (Triton kernels through the interpreter)
    "triton:rms_norm": Target("refengine/triton_kernels/norm.py",
                              ("rms_norm_kernel", "rms_norm", "_check"),
                              _parity("rms_norm and not add_rms and triton")),
    "triton:add_rms_norm": Target("refengine/triton_kernels/norm.py",
                                  ("add_rms_norm_kernel", "add_rms_norm",
                                   "residual_in_place_ok"),
                                  _parity("add_rms_norm and triton")),
    "triton:silu_and_mul": Target("refengine/triton_kernels/activation.py",
                                  ("silu_and_mul_kernel", "silu_and_mul"),
                                  _parity("silu_and_mul and triton")),
    # what the triton provider claims to serve, and whether it is there at all
    # (on cpu, then the emulated GPU profiles, where triton is primary and ROCm's fnuz
    # flavours are declined under the interpreter, then the e2e triton set, whose registry
    # asks triton for every op)
    "triton:supports": Target("refengine/providers/triton_provider.py", ("TritonProvider",),
                              ("suites/kernel_parity/test_coverage.py",
                               "suites/kernel_parity/test_parity.py", "--platform", "cpu",
                               "-k", "triton or every"),
                              also=(*(("suites/kernel_parity/test_coverage.py",
                                       "suites/kernel_parity/test_selection.py",
                                       "suites/kernel_parity/test_parity.py", "--platform",
                                       gpu, "--emulate", "-k",
                                       "every or selection or (fp8_quant and triton)")
                                      for gpu in ("rocm", "cuda")),
                                    ("suites/e2e/test_e2e.py", "--platform", "cpu", "-k",
                                     "triton"))),
    # the cpu matrix's primary providers (torch's fast paths)
    "torch:int8_scaled_gemm": Target("refengine/providers/torch_provider.py",
                                     ("int8_scaled_gemm", "_check_int_mm"),
                                     _parity("int8_scaled_gemm and torch")),
    "torch:fp8_scaled_gemm": Target("refengine/providers/torch_provider.py",
                                    ("_scaled_mm", "fp8_scaled_gemm", "_check_fp8_scaled"),
                                    _parity("fp8_scaled_gemm and torch")),
    "torch:add_rms_norm": Target("refengine/providers/torch_provider.py", ("add_rms_norm",),
                                 _parity("add_rms_norm and torch")),
    "torch:rms_norm": Target("refengine/providers/torch_provider.py", ("rms_norm",),
                             _parity("rms_norm and not add_rms and torch")),
    "torch:silu_and_mul": Target("refengine/providers/torch_provider.py", ("silu_and_mul",),
                                 _parity("silu_and_mul and torch")),
    "torch:gelu_and_mul": Target("refengine/providers/torch_provider.py", ("gelu_and_mul",),
                                 _parity("gelu_and_mul and torch")),
    "torch:attention_prefill": Target("refengine/providers/torch_provider.py",
                                      ("attention_prefill",),
                                      _parity("attention_prefill and torch")),
    "torch:attention_decode": Target("refengine/providers/torch_provider.py",
                                     ("attention_decode",),
                                     _parity("attention_decode and torch")),
    "torch:fused_moe": Target("refengine/providers/torch_provider.py", ("fused_moe",),
                              _parity("fused_moe and torch")),
    # what the torch provider claims to serve (a wrong claim turns failures into skips,
    # which the coverage test catches)
    "torch:supports": Target("refengine/providers/torch_provider.py",
                             ("TorchProvider", "_gpu_gemm_dims", "_check_int_mm", "_check_moe",
                              "_check_float"),
                             ("suites/kernel_parity/test_coverage.py",
                              "suites/kernel_parity/test_parity.py", "--platform", "cpu",
                              "-k", "torch or every")),
    # an emulated GPU matrix: the triton fp8 quantizer CUDA selects (ROCm's fnuz flavours
    # are declined under the interpreter), its mode / scale-shape dispatch, then the kernels
    "triton:fp8_quant@cuda": Target("refengine/triton_kernels/quant.py", ("fp8_quant",),
                                    _parity("fp8_quant and triton", "cuda", emulate=True)),
    "triton:fp8_quant_kernels@cuda": Target("refengine/triton_kernels/quant.py",
                                            ("_Launch", "quant_groups_kernel",
                                             "row_amax_kernel"),
                                            _parity("fp8_quant and triton", "cuda",
                                                    emulate=True)),
    # the cpu matrix's inductor provider: one dispatcher (torch.compile of the native op
    # per (op, dtype), the data-dependent ops declined) for every op, judged by every
    # op's inductor parity case
    "inductor:ops": Target("refengine/providers/inductor_provider.py", ("InductorProvider",),
                           ("suites/kernel_parity/test_coverage.py",
                            "suites/kernel_parity/test_parity.py", "--platform", "cpu",
                            "-k", "inductor or every")),
    # the fp8 fusion passes (RMSNorm + quant, SiLU-and-mul + quant): the fp8 decoder layer
    "fusion:rms_quant": Target("refengine/fusion/passes.py",
                               ("_quant_args", "_replace_root", "_rms_quant_pattern",
                                "_rms_quant"),
                               ("suites/fusion/test_fusion.py", "--platform", "cpu", "-k",
                                "test_decoder_layer_fp8")),
    "fusion:silu_quant": Target("refengine/fusion/passes.py",
                                ("_silu_quant_pattern", "_silu_quant"),
                                ("suites/fusion/test_fusion.py", "--platform", "cpu", "-k",
                                 "test_decoder_layer_fp8")),
    # all-reduce + RMSNorm: the tensor-parallel block on 2 gloo ranks
    "fusion:ar_rms": Target("refengine/fusion/passes.py", ("_ar_rms_pattern", "_ar_rms"),
                            ("suites/fusion/test_fusion.py", "--platform", "cpu", "-k",
                             "test_tensor_parallel_block")),
    # a fusion pass: the fusion suite's decoder-layer test
    "fusion:add_rms_norm": Target("refengine/fusion/passes.py",
                                  ("_add_rms_pattern", "_add_rms_check", "_add_rms"),
                                  ("suites/fusion/test_fusion.py", "--platform", "cpu", "-k",
                                   "test_decoder_layer and not fp8 or test_moe_block or "
                                   "leaves")),
}


def _unit(*files: str) -> tuple[str, ...]:
    return tuple(f"tests/unit/{f}.py" for f in files)


# harness's own modules whose bugs would make it lie (a failure read as a pass, a
# tolerance looser than the matrix's, a known failure covering what it does not name, a
# report that misses a change), against their own unit tests (docs/mutation.md).
TARGETS.update({
    "harness:numerics": Target("harness/plugin/numerics.py",
                               ("nonfinite", "nonfinite_problem", "_failed", "_bitwise",
                                "_same_nonfinite", "compare", "record_numerics"),
                               _unit("test_numerics")),
    "harness:tolerance_lookup": Target("harness/matrix/model.py", ("Tolerances",),
                                       _unit("test_tolerance_lookup", "test_matrix_loading")),
    "harness:known_failures": Target("harness/matrix/known_failures.py",
                                     ("Entry", "entries_from_matrix", "glob_to_regex",
                                      "entries_for", "match"),
                                     _unit("test_known_failures", "test_host_gate")),
    "harness:salvage": Target("harness/results/junit_write.py",
                              ("_case_from_record", "error_case", "read_partial",
                               "settle_partial", "_suite_element", "write_salvaged_junit",
                               "append_error_case", "_replace"),
                              _unit("test_salvage")),
    "harness:counts": Target("harness/results/outcome.py", ("Status", "failing"),
                             _unit("test_salvage")),
    "harness:skips": Target("harness/results/skips.py",
                            ("SkipSummary", "summarise_skips", "_reason"), _unit("test_skips")),
    "harness:outcome_mapping": Target("harness/results/junit_expat.py",
                                      ("_message", "case_status"),
                                      _unit("test_outcome_mapping", "test_junit_read")),
    "harness:report_changes": Target("harness/reports/queries.py", ("changes",),
                                     _unit("test_report_changes")),
    "harness:report_window": Target("harness/history/window.py", ("ids",),
                                    _unit("test_report_changes")),
    "harness:report_known": Target("harness/reports/build.py",
                                   ("_night_record", "_known_failures", "_changes"),
                                   _unit("test_report_changes")),
    "harness:report_advice": Target("harness/reports/model.py", ("KnownFailureRow",),
                                    _unit("test_report_changes")),
})

def _defs(module: str) -> tuple[str, ...]:
    """Every top-level function and class of ``module``: the whole module as a target."""
    tree = ast.parse((ROOT / module).read_text())
    return tuple(node.name for node in tree.body
                 if isinstance(node, ast.FunctionDef | ast.ClassDef))


def _whole(module: str, *tests: str) -> Target:
    return Target(module, _defs(module), _unit(*tests))


# The modules issues 38-41 added (and those that issue 47 added beside them), each whole,
# against its unit tests (docs/mutation.md, "The modules of issues 38-41 and 47").
TARGETS.update({
    "harness:requirements": _whole("harness/matrix/requirements.py", "test_pins",
                                   "test_bisect_input", "test_venvs", "test_bisect_rules"),
    "harness:pinlist": _whole("harness/bisect/pinlist.py", "test_bisect_input",
                              "test_bisect_rules"),
    "harness:verdict": _whole("harness/bisect/verdict.py", "test_bisect_input",
                              "test_bisect_rules", "test_bisect_on_speed"),
    "harness:memory_plan": _whole("harness/run/memory.py", "test_memory_plan",
                                  "test_memory_rules"),
    "harness:budget": _whole("harness/platform/budget.py", "test_memory_plan",
                             "test_memory_rules", "test_threads", "test_budget_edges"),
    "harness:memory_rules": _whole("harness/plugin/memory_rules.py", "test_memory_keeper",
                                   "test_memory_rules"),
    "harness:case_meaning": _whole("harness/results/case_meaning.py", "test_case_meaning",
                                   "test_misc_rules"),
    "harness:cause": _whole("harness/results/cause.py", "test_cause", "test_cause_table",
                            "test_cause_rules"),
    "harness:shard_suites": _whole("harness/shard/suites.py", "test_shard_suites",
                                   "test_shard_suites_rules"),
    "harness:pytest_argv": _whole("harness/importers/pytest_argv.py", "test_pytest_argv",
                                  "test_misc_rules"),
    "harness:cpu_tuning": _whole("harness/platform/cpu_tuning.py", "test_cpu_tuning"),
    "harness:releases": _whole("harness/run/releases.py", "test_releases",
                               "test_releases_rules"),
    "harness:import_release": _whole("harness/importers/release.py", "test_releases",
                                     "test_releases_rules"),
    "harness:merge": _whole("harness/results/merge.py", "test_merge_cut"),
    "harness:lane_data": _whole("harness/matrix/lane_data.py", "test_lane_data"),
    "harness:run_pins": _whole("harness/run/pins.py", "test_pins", "test_bisect_input",
                               "test_import_rules"),
    "harness:import_matrix_out": _whole("harness/importers/matrix_out.py",
                                        "test_import_buildkite_edges", "test_import_rules"),
    "harness:import_buildkite": _whole("harness/importers/buildkite.py",
                                       "test_import_buildkite_edges",
                                       "test_import_buildkite_errors", "test_buildkite_rules"),
    "harness:suite_junit": _whole("harness/results/suite_junit.py", "test_salvage",
                                  "test_skips", "test_buildkite_rules"),
    "harness:standalone_shrink": _whole("harness/repro/standalone_shrink.py",
                                        "test_standalone_shrink"),
    "harness:kernel_table": _whole("harness/platform/kernel_table.py", "test_kernel_table"),
    # the process-heavy modules' parts that unit tests reach (their integration tests,
    # minutes a mutant, judge the rest: docs/mutation.md)
    "harness:standalone_ops": _whole("harness/repro/standalone_ops.py", "test_standalone_ops",
                                     "test_standalone_extract"),
    # --standalone's steps, a user's suite whose hook writes plain-Python scripts (a real
    # hook subprocess and script run each, well under a second); the script template's
    # own code is text here, judged by test_standalone.py's scripts
    "harness:standalone_render": _whole("harness/repro/standalone_render.py",
                                        "test_standalone_ops", "test_standalone_engine",
                                        "test_standalone_shrink"),
    "harness:standalone_dump": _whole("harness/repro/standalone_dump.py",
                                      "test_standalone_hook"),
    "harness:standalone_hook": _whole("harness/repro/standalone_hook.py",
                                      "test_standalone_hook", "test_standalone_flow"),
    "harness:standalone": _whole("harness/repro/standalone.py", "test_standalone_flow"),
    "harness:standalone_main": _whole("harness/repro/standalone_main.py",
                                      "test_standalone_flow"),
    "harness:memory_scheduler": Target(
        "harness/plugin/memory.py", _defs("harness/plugin/memory.py"),
        (*_unit("test_memory_measure", "test_memory_handoff", "test_memory_keeper"),
         "tests/integration/test_memory_xdist.py")),
    # CPUID's flag table and its reading, against the kernel's and qemu's answers
    "harness:cpuid": Target("harness/platform/cpuid.py",
                            ("FLAGS", *_defs("harness/platform/cpuid.py")), _unit("test_cpuid")),
    "harness:fingerprint": _whole("harness/results/fingerprint.py", "test_standalone_shrink",
                                  "test_cause", "test_compare_input"),
    "harness:ci_providers": _whole("harness/ci/providers.py", "test_ci_pipeline"),
    # the emulated CPU whole, with the real qemu-user (its wrapper run, CPUID read inside)
    "harness:cpu_emulation": _whole("harness/platform/cpu_emulation.py", "test_cpu_emulation",
                                    "test_cpu_tuning"),
    "harness:compare": _whole("harness/reports/compare.py", "test_compare_input",
                              "test_compare_rules"),
    "harness:compare_render": _whole("harness/reports/compare_render.py", "test_compare_rules"),
    # bisect whole: its walks and steps against real `harness run --python current` steps
    # of a scratch project (about 2 s a step) and a real checkout's worktrees
    "harness:bisect_commits": _whole("harness/bisect/commits.py", "test_bisect_input",
                                     "test_bisect_rules", "test_bisect_search",
                                     "test_bisect_walks"),
    "harness:bisect_run": _whole("harness/bisect/run.py", "test_bisect_input",
                                 "test_bisect_rules", "test_bisect_search", "test_bisect_walks"),
    "harness:bisect_steps": _whole("harness/bisect/steps.py", "test_bisect_walks"),
    # the fork server, its stand-in and the runner's side, with a light module preloaded
    # (seconds a mutant; test_forkserver.py walks the same through `harness run`)
    "harness:forkserver": Target("harness/process/forkserver.py",
                                 ("_MAX_HEADER", "_CANARY_S",
                                  *_defs("harness/process/forkserver.py")),
                                 _unit("test_forkserver_protocol")),
    "harness:forkserver_runner": _whole("harness/runners/forkserver.py",
                                        "test_forkserver_protocol"),
})

# Issue 50's selection from an engine source change: the map of native sources (against
# vLLM 0.32.0's own sdist, tests/integration/test_native_map.py, and the hand-built edge
# cases), the diff reader and the per-lane rules.
_ENGINE_TESTS = (*_unit("test_engine_select_rules"), "tests/integration/test_native_map.py")
TARGETS.update({
    "harness:native_map": Target("harness/select/native.py",
                                 _defs("harness/select/native.py"), _ENGINE_TESTS),
    "harness:engine_change": Target("harness/select/engine_change.py",
                                    _defs("harness/select/engine_change.py"), _ENGINE_TESTS),
    "harness:by_ops": Target("harness/select/by_ops.py", _defs("harness/select/by_ops.py"),
                             _ENGINE_TESTS),
})

# Issue 49's op record and audit: the record's format and its counter on torch's op classes,
# the audit of an engine's own CI, the report's ops view (over stored real runs), each
# against its unit tests.
TARGETS.update({
    "harness:op_record": _whole("harness/results/op_record.py", "test_op_record_format"),
    "harness:op_counter": _whole("harness/plugin/ops.py", "test_op_record_format",
                                 "test_op_record_plugin"),
    "harness:ci_audit": _whole("harness/importers/audit.py", "test_ci_audit_rules"),
    "harness:ci_audit_render": _whole("harness/importers/audit_render.py", "test_ci_audit_rules"),
    "harness:report_ops": _whole("harness/reports/ops.py", "test_ops_view"),
})

# Issue 51's speed: the ratio's vocabulary and regression rule, the timing and the thread
# check (bisect's verdict on speed: harness:verdict).
_SPEED_TESTS = (*_unit("test_speed_rules"),)
TARGETS.update({
    "harness:speed_rules": Target("harness/results/speed.py",
                                  _defs("harness/results/speed.py"), _SPEED_TESTS),
    "harness:speed_timing": Target("harness/plugin/speed.py",
                                   _defs("harness/plugin/speed.py"), _SPEED_TESTS),
})

KEEP_OPERATORS = (
    "core/ReplaceBinaryOperator_Add_Sub", "core/ReplaceBinaryOperator_Sub_Add",
    "core/ReplaceBinaryOperator_Mul_Div", "core/ReplaceBinaryOperator_Div_Mul",
    "core/ReplaceBinaryOperator_Mul_Add", "core/ReplaceBinaryOperator_Add_Mul",
    "core/ReplaceComparisonOperator_Lt_LtE", "core/ReplaceComparisonOperator_LtE_Lt",
    "core/ReplaceComparisonOperator_Gt_GtE", "core/ReplaceComparisonOperator_GtE_Gt",
    "core/ReplaceComparisonOperator_Eq_NotEq", "core/ReplaceComparisonOperator_NotEq_Eq",
    "core/ReplaceComparisonOperator_Lt_Gt", "core/ReplaceComparisonOperator_Gt_Lt",
    "core/NumberReplacer", "core/ReplaceTrueWithFalse", "core/ReplaceFalseWithTrue",
    "core/ReplaceAndWithOr", "core/ReplaceOrWithAnd", "core/ZeroIterationForLoop",
    "core/AddNot", "core/ReplaceUnaryOperator_USub_UAdd",
)


def line_ranges(path: Path, functions: tuple[str, ...]) -> list[str]:
    tree = ast.parse(path.read_text())
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in functions:
            # the body only: mutating a decorator or a signature is not a kernel bug
            start = node.body[0].lineno
            found[node.name] = f"{start}-{node.end_lineno}"
        elif isinstance(node, ast.Assign) and node.col_offset == 0:
            # a module's table (a name assigned at the top level): its values
            for name in {t.id for t in node.targets if isinstance(t, ast.Name)} & set(functions):
                found[name] = f"{node.value.lineno}-{node.end_lineno}"
    missing = set(functions) - set(found)
    if missing:
        raise SystemExit(f"{path}: no function {', '.join(sorted(missing))}")
    return [found[f] for f in functions]


def _excluded_operators(cosmic: str) -> list[str]:
    names = subprocess.run([cosmic, "operators"], capture_output=True, text=True,
                           check=True).stdout.split()
    return [f"^{n}$" for n in names if n not in KEEP_OPERATORS]


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def copy_checkout(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\n")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def equivalents() -> dict[tuple[str, int, str, int], str]:
    out = {}
    if EQUIVALENT.is_file():
        for line in EQUIVALENT.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                target, lineno, op, occ, why = line.split("\t", 4)
                out[(target, int(lineno), op, int(occ))] = why
    return out


def run_target(name: str, target: Target, workdir: Path, timeout: float,
               tally_only: bool = False) -> dict[str, object]:
    bindir = Path(sys.executable).parent
    cosmic = str(bindir / "cosmic-ray")
    config = workdir / f"{name.replace(':', '_').replace('@', '_')}.toml"
    session = config.with_suffix(".sqlite")
    if not tally_only:
        session.unlink(missing_ok=True)
    tests = " ".join(f"'{a}'" if " " in a else a for a in target.tests)
    pytest = f"{sys.executable} -m pytest -x -q -p no:cacheprovider {tests}"
    if target.also:  # several runs: this script runs them in turn (see run_tests)
        pytest = f"{sys.executable} bench/mutation.py --run-tests {name}"
    ranges = line_ranges(workdir / target.module, target.functions)
    config.write_text(
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(target.module)}\n"
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(pytest)}\n"
        "[cosmic-ray.distributor]\nname = \"local\"\n"
        "[cosmic-ray.filters.operators-filter]\n"
        f"exclude-operators = {_toml_list(_excluded_operators(cosmic))}\n"
        "[cosmic-ray.filters.line-filter.lines]\n"
        f"{json.dumps(target.module)} = {_toml_list(ranges)}\n"
    )
    env = dict(os.environ, PYTHONPATH=str(workdir), TRITON_INTERPRET="1")
    tiktoken = Path.home() / ".cache" / "harness" / "tiktoken"  # `harness cache prime`'s
    if tiktoken.is_dir():
        env.setdefault("TIKTOKEN_CACHE_DIR", str(tiktoken))
    env.setdefault("TORCHINDUCTOR_CACHE_DIR",
                   str(Path.home() / ".cache" / "harness" / "inductor"))

    def cr(*argv: str) -> str:
        return subprocess.run(list(argv), cwd=workdir, env=env, capture_output=True, text=True,
                              check=True).stdout

    if not tally_only:
        cr(cosmic, "init", str(config), str(session))
        cr(str(bindir / "cr-filter-operators"), str(session), str(config))
        cr(str(bindir / "cr-filter-lines"), "--config", str(config), str(session))
        cr(cosmic, "exec", str(config), str(session))
    known = equivalents()
    counts = {"killed": 0, "survived": 0, "equivalent": 0, "timeout": 0, "incompetent": 0}
    survivors = []
    for line in cr(cosmic, "dump", str(session)).splitlines():
        item, result = json.loads(line)
        if result is None or result.get("worker_outcome") == "skipped":
            continue
        mutation = item["mutations"][0]
        key = (name, mutation["start_pos"][0], mutation["operator_name"],
               mutation["occurrence"])
        outcome, test_outcome = result["worker_outcome"], result.get("test_outcome")
        if outcome == "timeout":
            counts["timeout"] += 1  # a mutant that hangs the kernel is caught (killed)
            counts["killed"] += 1
        elif outcome != "normal":
            counts["incompetent"] += 1
        elif test_outcome == "killed":
            counts["killed"] += 1
        elif key in known:
            counts["equivalent"] += 1
        else:
            counts["survived"] += 1
            survivors.append(f"{target.module}:{key[1]} {key[2]} #{key[3]}: "
                             f"{_changed_lines(result.get('diff') or '')}")
    judged = counts["killed"] + counts["survived"]
    return {"target": name, **counts, "score": counts["killed"] / judged if judged else None,
            "survivors": survivors}


def _changed_lines(diff: str) -> list[str]:
    """The mutant's removed and added lines (not the diff's context)."""
    return [line.strip() for line in diff.splitlines()
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def run_tests(name: str) -> int:
    """A target's pytest runs in turn, stopping at the first that fails (its exit code)."""
    target = TARGETS[name]
    for args in (target.tests, *target.also):
        code = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q",
                               "-p", "no:cacheprovider", *args]).returncode
        if code:
            return code
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", action="append", default=[], choices=sorted(TARGETS),
                        help="op of a provider (repeatable; default: all)")
    parser.add_argument("--timeout", type=float, default=180.0, help="per mutant, seconds")
    parser.add_argument("--workdir", default=None, help="where the checkout is copied")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--list", action="store_true", help="list the targets and exit")
    parser.add_argument("--tally-only", action="store_true",
                        help="count the sessions already in --workdir again (no mutants run)")
    parser.add_argument("--run-tests", metavar="TARGET", choices=sorted(TARGETS),
                        help="run TARGET's test command (what each mutant is judged by)")
    args = parser.parse_args()
    if args.run_tests:
        return run_tests(args.run_tests)
    if args.list:
        for name, target in TARGETS.items():
            print(f"{name:<24} {target.module} {','.join(target.functions)}")
        return 0
    if not (Path(sys.executable).parent / "cosmic-ray").is_file():
        print(f"mutation.py: cosmic-ray is not installed beside {sys.executable} "
              "(pip install -e '.[mutation]')", file=sys.stderr)
        return 2
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="harness-mutation-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if not args.tally_only:
        copy_checkout(workdir)
    rows = []
    for name in args.target or list(TARGETS):
        row = run_target(name, TARGETS[name], workdir, args.timeout, args.tally_only)
        rows.append(row)
        score = row["score"]
        print(f"{name:<24} killed {row['killed']:>3}  survived {row['survived']:>3}  "
              f"equivalent {row['equivalent']:>3}  incompetent {row['incompetent']:>3}  "
              f"score {'-' if score is None else f'{score:.0%}'} (target "
              f"{TARGET_SCORE:.0%})", flush=True)
        for survivor in row["survivors"]:  # type: ignore[attr-defined]
            print(f"    survived: {survivor}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    below = [r for r in rows if r["score"] is not None and r["score"] < TARGET_SCORE]
    return 1 if below else 0


if __name__ == "__main__":
    sys.exit(main())
