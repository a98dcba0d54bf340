"""A GitHub Actions run for tests/docker/test_ci_agent.py: the workflow's jobs in order of
their ``needs``, ``if:`` and ``${{ }}`` expressions evaluated, strategy matrices expanded
(``fromJSON`` of a job's outputs included), each job on an agent of ci_agents.py in a
fresh checkout with the provider's variables and files ($GITHUB_OUTPUT, $GITHUB_PATH,
$GITHUB_ENV, $GITHUB_STEP_SUMMARY). The actions the workflows use are stood in for by
what they do to the runner's folders: checkout (a clone), upload / download-artifact and
cache restore / save (a store folder). Faked: only the provider; every ``run:`` script is
run verbatim after its expressions are substituted, as the runner does.
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import yaml
from ci_agents import STORE, Agent

_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>\d+(?:\.\d+)?)|"
                    r"(?P<op>==|!=|&&|\|\||[!().,\[\]*])|(?P<id>[A-Za-z_][A-Za-z0-9_-]*))")
_EXPR = re.compile(r"\$\{\{((?:(?!\}\}).)*)\}\}")
_counter = itertools.count(1)


class Expr:
    """GitHub's expression language, as much of it as the generated workflows use."""

    def __init__(self, context: Mapping[str, Any], status: Callable[[str], bool],
                 hash_files: Callable[[str], str]) -> None:
        self.context, self.status, self.hash_files = context, status, hash_files
        self.tokens: list[tuple[str | None, str]] = []
        self.pos = 0

    def eval(self, text: str) -> Any:
        source, at, self.tokens = text.strip(), 0, []
        while at < len(source):
            m = _TOKEN.match(source, at)
            assert m is not None and m.lastgroup, f"cannot parse {text!r} at {at}"
            self.tokens.append((m.lastgroup, m.group(m.lastgroup)))
            at = m.end()
        self.pos = 0
        value = self._or()
        assert self.pos == len(self.tokens), f"trailing tokens in {text}"
        return value

    def _peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def _take(self) -> tuple[str | None, str]:
        self.pos += 1
        return self.tokens[self.pos - 1]

    def _or(self) -> Any:
        value = self._and()
        while self._peek() == "||":
            self._take()
            right = self._and()
            value = value if truthy(value) else right
        return value

    def _and(self) -> Any:
        value = self._unary()
        while self._peek() == "&&":
            self._take()
            right = self._unary()
            value = right if truthy(value) else value
        return value

    def _unary(self) -> Any:
        if self._peek() == "!":
            self._take()
            return not truthy(self._unary())
        left = self._primary()
        if self._peek() in ("==", "!="):
            op = self._take()[1]
            same = loose(left) == loose(self._primary())
            return same if op == "==" else not same
        return left

    def _primary(self) -> Any:
        kind, token = self._take()
        if token == "(":
            value = self._or()
            assert self._take()[1] == ")"
            return value
        if kind == "str":
            return token[1:-1].replace("''", "'")
        if kind == "num":
            return float(token)
        if token in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[token]
        if self._peek() == "(":
            self._take()
            args = []
            while self._peek() != ")":
                args.append(self._or())
                if self._peek() == ",":
                    self._take()
            self._take()
            return self._call(token, args)
        return self._path(self.context.get(token))

    def _path(self, value: Any) -> Any:
        while self._peek() in (".", "["):
            if self._take()[1] == "[":
                key = self._or()
                assert self._take()[1] == "]"
            else:
                key = self._take()[1]
            if key == "*":
                value = [v for v in value] if isinstance(value, list) else list(
                    (value or {}).values())
                value = _Star(value)
            elif isinstance(value, _Star):
                value = _Star([v.get(key) if isinstance(v, dict) else None for v in value])
            else:
                value = value.get(key) if isinstance(value, dict) else None
        return list(value) if isinstance(value, _Star) else value

    def _call(self, name: str, args: list[Any]) -> Any:
        low = name.lower()
        if low in ("success", "failure", "cancelled", "always"):
            return self.status(low)
        if low == "fromjson":
            return json.loads(args[0])
        if low == "contains":
            hay, needle = args
            if isinstance(hay, list):
                return any(loose(h) == loose(needle) for h in hay)
            return str(needle).lower() in str(hay).lower()
        if low == "hashfiles":
            return self.hash_files(args[0])
        raise AssertionError(f"expression function not stood in for: {name}")


class _Star(list):  # type: ignore[type-arg]
    """The result of a `.*` filter, still to be dereferenced."""


def truthy(value: Any) -> bool:
    return value not in (None, False, 0, 0.0, "")


def loose(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return value.lower()
    return float(value) if isinstance(value, int | float) else value


def as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def substitute(node: Any, expr: Expr) -> Any:
    """${{ }} in strings: a whole-string expression keeps its type, others become text."""
    if isinstance(node, dict):
        return {k: substitute(v, expr) for k, v in node.items()}
    if isinstance(node, list):
        return [substitute(v, expr) for v in node]
    if isinstance(node, str):
        whole = _EXPR.fullmatch(node.strip())
        if whole:
            return expr.eval(whole.group(1))
        return _EXPR.sub(lambda m: as_text(expr.eval(m.group(1))), node)
    return node


@dataclass
class JobRun:
    job: str
    matrix: dict[str, Any]
    result: str  # success | failure
    outputs: dict[str, str]
    steps: list[tuple[str, int, str]]  # (name, exit status, output)
    summary: str
    runs_on: Any
    timeout: float


@dataclass
class GithubRun:
    agents: list[Agent]
    event: dict[str, Any]  # the github context: event_name, sha, ref, base_ref, ...
    run_id: str = field(default_factory=lambda: str(next(_counter) + 1000))
    runs: list[JobRun] = field(default_factory=list)

    def run(self, workflow_text: str) -> dict[str, str]:
        doc = yaml.safe_load(workflow_text)
        self.env = {k: str(v) for k, v in (doc.get("env") or {}).items()}
        needs_ctx: dict[str, Any] = {}
        for job_id, job in doc["jobs"].items():
            needs = job.get("needs") or []
            needs = [needs] if isinstance(needs, str) else needs
            assert all(n in needs_ctx for n in needs), f"{job_id}: needs a later job"
            github = {**self.event, "run_id": self.run_id, "run_attempt": "1",
                      "workflow": doc.get("name", "")}
            ctx = {"github": github, "needs": {n: needs_ctx[n] for n in needs},
                   "env": self.env}
            ok_needs = all(needs_ctx[n]["result"] == "success" for n in needs)
            cond = str(job.get("if", "success()")).strip()
            cond = _EXPR.fullmatch(cond).group(1) if _EXPR.fullmatch(cond) else cond
            if not re.search(r"\b(success|failure|cancelled|always)\(", cond):
                cond = f"success() && ({cond})"
            expr = Expr(ctx, lambda s, ok=ok_needs: {"success": ok, "failure": not ok,
                                                     "cancelled": False, "always": True}[s],
                        lambda _: "")
            if not truthy(expr.eval(cond)):
                needs_ctx[job_id] = {"result": "skipped", "outputs": {}}
                continue
            entries = self._entries(job, expr)
            # a matrix's jobs run at once, each on a runner of its own (round robin here)
            turn = len(self.runs)
            with ThreadPoolExecutor(max_workers=len(entries)) as pool:
                futures = [pool.submit(self._job, job_id, job, ctx, entry,
                                       self.agents[(turn + n) % len(self.agents)])
                           for n, entry in enumerate(entries)]
                runs = [f.result() for f in futures]
            self.runs += runs
            failed = any(r.result == "failure" for r in runs)
            outputs = runs[-1].outputs if runs else {}
            needs_ctx[job_id] = {"result": "failure" if failed else "success",
                                 "outputs": outputs}
        return {job: value["result"] for job, value in needs_ctx.items()}

    def _entries(self, job: dict[str, Any], expr: Expr) -> list[dict[str, Any]]:
        matrix = (job.get("strategy") or {}).get("matrix")
        if matrix is None:
            return [{}]
        matrix = substitute(matrix, expr)
        include = list(matrix.get("include") or [])
        axes = {k: v for k, v in matrix.items() if k not in ("include", "exclude")}
        if axes:
            keys = list(axes)
            include = [dict(zip(keys, combo, strict=True))
                       for combo in itertools.product(*(axes[k] for k in keys))] + include
        assert include, "a matrix with no entries fails the run on GitHub"
        return include

    def _job(self, job_id: str, job: dict[str, Any], ctx: dict[str, Any],
             entry: dict[str, Any], agent: Agent) -> JobRun:
        name = f"{job_id}-{next(_counter)}"
        ws = f"/builds/{name}"
        files = {k: f"/builds/{name}.{k}" for k in ("output", "env", "path", "summary")}
        ctx = {**ctx, "matrix": entry, "steps": {}}
        job_ok = [True]

        def status(which: str) -> bool:
            return {"success": job_ok[0], "failure": not job_ok[0], "cancelled": False,
                    "always": True}[which]

        def hash_files(pattern: str) -> str:
            done = agent.sh(f"sha256sum {shlex.quote(pattern)} 2>/dev/null || true", {}, ws,
                            timeout=60)
            return done.stdout.split()[0] if done.stdout.strip() else ""

        expr = Expr(ctx, status, hash_files)
        head = substitute({k: job.get(k) for k in ("runs-on", "timeout-minutes",
                                                   "continue-on-error")}, expr)
        assert head["runs-on"], f"{job_id}: no runs-on"
        timeout = float(head["timeout-minutes"])
        assert timeout > 0, f"{job_id}: timeout-minutes {timeout}"
        agent.sh(f"mkdir -p {ws} && touch {' '.join(files.values())}", {}, "/", timeout=60)
        base = {"CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": ws,
                "GITHUB_RUN_ID": self.run_id, "GITHUB_RUN_ATTEMPT": "1",
                "GITHUB_SHA": self.event["sha"], "GITHUB_REF": self.event["ref"],
                "GITHUB_BASE_REF": self.event.get("base_ref", ""),
                "GITHUB_HEAD_REF": self.event.get("head_ref", ""),
                "GITHUB_EVENT_NAME": self.event["event_name"],
                "GITHUB_REPOSITORY": self.event["repository"], "RUNNER_TEMP": f"{ws}.tmp",
                "GITHUB_OUTPUT": files["output"], "GITHUB_ENV": files["env"],
                "GITHUB_PATH": files["path"], "GITHUB_STEP_SUMMARY": files["summary"]}
        steps: list[tuple[str, int, str]] = []
        extra_path: list[str] = []
        for index, step in enumerate(job["steps"]):
            cond = str(step.get("if", "success()")).strip()
            cond = _EXPR.fullmatch(cond).group(1) if _EXPR.fullmatch(cond) else cond
            if not re.search(r"\b(success|failure|cancelled|always)\(", cond):
                cond = f"success() && ({cond})"
            if not truthy(expr.eval(cond)):
                continue
            agent.sh(f": > {files['output']}", {}, "/", timeout=60)
            env = {**self.env, **base, **{k: as_text(v) for k, v in substitute(
                {**(job.get("env") or {}), **(step.get("env") or {})}, expr).items()}}
            if extra_path:
                env["PATH"] = ":".join([*reversed(extra_path), "/ci-bin", "/usr/local/bin",
                                        "/usr/bin", "/bin"])
            label = step.get("name") or step.get("uses") or f"step {index}"
            started = time.monotonic()
            if "uses" in step:
                code, out = self._action(agent, step, expr, ws, env, name)
            else:
                script = "set -o pipefail\n" + substitute(step["run"], expr)
                done = agent.sh(script, env, ws, timeout=timeout * 60)
                code, out = done.returncode, done.stdout + done.stderr
            steps.append((label, code, out))
            print(f"github: {job_id} {entry.get('label', '')}: {label}: exit {code} in "
                  f"{time.monotonic() - started:.0f} s", flush=True)
            if code != 0:
                job_ok[0] = False
            read = agent.sh(f"cat {files['output']}; echo '#--'; cat {files['path']}", {}, "/",
                            timeout=60).stdout
            outputs, _, paths = read.partition("#--\n")
            if step.get("id"):
                ctx["steps"][step["id"]] = {"outputs": dict(
                    line.split("=", 1) for line in outputs.splitlines() if "=" in line)}
            extra_path = [p for p in paths.splitlines() if p]
        summary = agent.sh(f"cat {files['summary']}", {}, "/", timeout=60).stdout
        outputs = {k: as_text(v) for k, v in substitute(job.get("outputs") or {}, expr).items()}
        result = "success" if job_ok[0] or head["continue-on-error"] is True else "failure"
        return JobRun(job=job_id, matrix=entry, result=result, outputs=outputs, steps=steps,
                      summary=summary, runs_on=head["runs-on"], timeout=timeout)

    def _action(self, agent: Agent, step: dict[str, Any], expr: Expr, ws: str,
                env: dict[str, str], name: str) -> tuple[int, str]:
        uses = step["uses"].split("@")[0]
        args = {k: as_text(v) for k, v in substitute(step.get("with") or {}, expr).items()}
        store = f"{STORE}/gh-{self.run_id}"
        if uses == "actions/checkout":
            depth = int(args.get("fetch-depth", "1"))
            agent.sh(f"rm -rf {ws}", {}, "/", timeout=60)
            agent.checkout(name, self.event["sha"], depth=depth,
                           branch=self.event["head_branch"])
            return 0, "checked out"
        if uses == "actions/upload-artifact":
            target = f"{store}/artifacts/{args['name']}"
            script = (f"test ! -e {target} || {{ echo 'artifact exists: {args['name']}'; exit 1; }}"
                      f"\nif [ -z \"$(ls -A {args['path']} 2>/dev/null)\" ]; then "
                      f"[ '{args.get('if-no-files-found', 'warn')}' != error ]; exit; fi"
                      f"\nmkdir -p {target} && cp -a {args['path'].rstrip('/')}/. {target}/")
        elif uses == "actions/download-artifact":
            dest = args.get("path", ".")
            if "pattern" in args:
                script = (f"mkdir -p {dest}; for a in {store}/artifacts/{args['pattern']}; do "
                          f"[ -d \"$a\" ] || continue; mkdir -p {dest}/$(basename $a); "
                          f"cp -a $a/. {dest}/$(basename $a)/; done")
            else:
                script = (f"test -d {store}/artifacts/{args['name']} && mkdir -p {dest} && "
                          f"cp -a {store}/artifacts/{args['name']}/. {dest}/")
        elif uses == "actions/cache/restore":
            caches = f"{STORE}/gh-cache"
            prefixes = " ".join(shlex.quote(p) for p in args.get("restore-keys", "").split())
            script = (f"mkdir -p {caches}; hit={caches}/{args['key']}; "
                      f"if [ ! -d \"$hit\" ]; then hit=; for p in {prefixes}; do "
                      f"hit=$(ls -dt {caches}/$p* 2>/dev/null | head -n 1); "
                      f"[ -n \"$hit\" ] && break; done; fi; "
                      f"if [ -n \"$hit\" ]; then mkdir -p $(dirname {args['path']}); "
                      f"cp -a $hit/data {args['path']}; echo \"restored $hit\"; fi")
        elif uses == "actions/cache/save":
            target = f"{STORE}/gh-cache/{args['key']}"
            script = (f"if [ -e {target} ]; then echo 'cache exists: {args['key']}'; exit 0; "
                      f"fi; mkdir -p {target} && cp -a {args['path']} {target}/data")
        else:
            raise AssertionError(f"action not stood in for: {step['uses']}")
        done = agent.sh(script, env, ws, timeout=600)
        return done.returncode, done.stdout + done.stderr
