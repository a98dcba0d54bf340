"""C/C++ source read for what the native map needs, without a compiler: the ``def`` /
``impl`` calls of ``TORCH_LIBRARY`` blocks, which functions a file defines (a body follows)
and declares (a ``;`` follows), with comments blanked so that lines and offsets hold.
native.py builds the map from these."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

DEFAULT_NAMESPACE = "_C"
_LIBRARY = re.compile(r"\b(?:STABLE_)?TORCH_LIBRARY(?:_FRAGMENT|_IMPL|_EXPAND)?\s*\(\s*"
                      r"((?:CONCAT\s*\([^()]*\))|[A-Za-z_]\w*)\s*,\s*(?:([A-Za-z_]\w*)\s*,\s*)?"
                      r"([A-Za-z_]\w*)\s*\)")
_DEFINE_NAME = re.compile(r"^\s*#\s*define\s+TORCH_EXTENSION_NAME\s+(\w+)", re.M)
_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_FUNC_REF = re.compile(r"&\s*((?:[A-Za-z_]\w*::)*[A-Za-z_]\w*)")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


@dataclass(frozen=True, slots=True)
class Registration:
    """One op's ``def`` or ``impl`` call: where, and the functions it names."""

    op: str  # "_C::rms_norm"
    file: str
    lines: tuple[int, int]  # first and last line of the call, 1-based
    functions: tuple[str, ...]  # unqualified names ("rms_norm")


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _blank_comments(text: str) -> str:
    """``text`` with its comments blanked (newlines kept: offsets and lines still hold)."""
    return _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _closing(text: str, start: int, open_: str = "(", close: str = ")") -> int:
    """The offset just past the bracket matching the one at ``start`` (-1: unbalanced)."""
    depth = 0
    i = start
    in_string = False
    while i < len(text):
        ch = text[i]
        if in_string:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == open_:
            depth += 1
        elif ch == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def _namespace(token: str, default: str) -> str:
    token = re.sub(r"\s+", "", token)
    concat = re.fullmatch(r"CONCAT\((\w+),(\w+)\)", token)
    if concat:
        head = default if concat.group(1) == "TORCH_EXTENSION_NAME" else concat.group(1)
        return head + concat.group(2)
    return default if token == "TORCH_EXTENSION_NAME" else token


def read_registrations(path: str, text: str) -> tuple[Registration, ...]:
    """The ``def`` / ``impl`` calls of every ``TORCH_LIBRARY`` block of one file."""
    code = _blank_comments(text)
    defined = _DEFINE_NAME.search(code)
    default = defined.group(1) if defined else DEFAULT_NAMESPACE
    out: list[Registration] = []
    for block in _LIBRARY.finditer(code):
        namespace = _namespace(block.group(1), default)
        var = block.group(3)
        brace = code.find("{", block.end())
        end = _closing(code, brace, "{", "}") if brace >= 0 else -1
        if brace < 0 or end < 0:
            continue
        body_start, body = brace, code[brace:end]
        for call in re.finditer(rf"\b{re.escape(var)}\s*\.\s*(def|impl)\s*\(", body):
            close = _closing(body, call.end() - 1)
            if close < 0:
                continue
            args = body[call.end():close - 1]
            literals = _leading_strings(args)
            if not literals:
                continue
            name = literals.split("(", 1)[0].strip()
            name = name.split(".", 1)[0]  # an overload: "op.out"
            if "::" in name:
                namespace_here, _, name = name.rpartition("::")
            else:
                namespace_here = namespace
            functions = tuple(ref.rsplit("::", 1)[-1] for ref in _FUNC_REF.findall(args))
            first = _line_of(code, body_start + call.start())
            last = _line_of(code, body_start + close)
            out.append(Registration(op=f"{namespace_here}::{name}", file=path,
                                    lines=(first, last), functions=functions))
    return tuple(out)


def _leading_strings(args: str) -> str:
    """The first argument when it is (adjacent) string literals, joined; "" otherwise."""
    text = args.lstrip()
    joined = []
    while True:
        match = _STRING.match(text)
        if not match:
            break
        joined.append(match.group(1))
        text = text[match.end():].lstrip()
    return "".join(joined) if joined and (not text or text[0] == ",") else ""


_PARAMS = r"\((?:[^;{}()]|\((?:[^;{}()]|\([^;{}()]*\))*\))*\)"
_DEFINITION = re.compile(r"(?<![\w.>:])(?:\w+::)*([A-Za-z_]\w*)\s*(?:<[^;{}()<>]*>\s*)?" + _PARAMS
                         + r"\s*(?:const\s*)?(?:noexcept\s*(?:\([^()]*\))?\s*)?"
                         r"(?:->\s*[\w:<>,\s*&]+?\s*)?(?::\s*[^;{}]*)?\{")
_DECLARATION = re.compile(r"(?m)^[ \t]*(?!return\b)(?:[\w:<>*&,]+[ \t\n]+)+[*&]*"
                          r"([A-Za-z_]\w*)\s*" + _PARAMS + r"\s*;")
_NOT_FUNCTIONS = frozenset({"if", "for", "while", "switch", "catch", "return", "sizeof",
                            "decltype", "alignas", "static_assert", "defined", "do", "else",
                            "template"})


def defines(text: str) -> set[str]:
    """The functions this file defines: ``name(...)`` (optionally qualified, a template's
    arguments, ``const``, ``noexcept``, a trailing return type or an initialiser list
    between) followed by its body, not by ``;``."""
    code = _blank_comments(text)
    return {m.group(1) for m in _DEFINITION.finditer(code)} - _NOT_FUNCTIONS


def declarations(text: str, names: Iterable[str] | None = None) -> dict[str, tuple[int, int]]:
    """Where this file declares functions (``ret name(...);`` at a line's start): the lines
    from each declaration's start to its ``;``; only ``names`` when given."""
    code = _blank_comments(text)
    wanted = None if names is None else set(names)
    out: dict[str, tuple[int, int]] = {}
    for match in _DECLARATION.finditer(code):
        name = match.group(1)
        if name in _NOT_FUNCTIONS or (wanted is not None and name not in wanted):
            continue
        out.setdefault(name, (_line_of(code, match.start()), _line_of(code, match.end())))
    return out
