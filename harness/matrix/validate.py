"""Check a merged matrix against the declarations in ``schema.py``, then across keys.

Every problem becomes a ConfigError naming the file and line that set the offending
key (after merging, the file that set a key is the one to fix). All problems are
collected so the user fixes them in one pass.
"""

from __future__ import annotations

import datetime
import difflib
import posixpath
import re
from dataclasses import dataclass

from harness.errors import ConfigError
from harness.matrix import schema as S
from harness.matrix.merge import type_name
from harness.matrix.yamlsafe import LDict, LList, Loc


def did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str:
    near = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {near[0]}?)" if near else ""


@dataclass
class _Ref:
    path: str
    value: str
    where: Loc


class _Walker:
    def __init__(self) -> None:
        self.errors: list[ConfigError] = []
        self.capability_refs: list[_Ref] = []

    def error(self, message: str, path: str, where: Loc) -> None:
        self.errors.append(ConfigError(message, file=where[0], line=where[1], key=path or None))

    def walk(self, value: object, node: S.Type, path: str, where: Loc) -> None:
        if value is None:
            if not node.nullable:
                self.error(f"expected {_hint(node)}, got null", path, where)
            return
        if isinstance(node, S.Str):
            self._str(value, node, path, where)
        elif isinstance(node, S.Int):
            if isinstance(value, bool) or not isinstance(value, int):
                self.error(f"expected an integer, got {_shown(value)}", path, where)
            elif node.minimum is not None and value < node.minimum:
                self.error(f"must be at least {node.minimum}, got {value}", path, where)
        elif isinstance(node, S.Num):
            if isinstance(value, bool) or not isinstance(value, int | float):
                self.error(f"expected a number, got {_shown(value)}", path, where)
            elif node.minimum is not None and value < node.minimum:
                self.error(f"must be at least {node.minimum}, got {value}", path, where)
        elif isinstance(node, S.Bool):
            if not isinstance(value, bool):
                self.error(f"expected true or false, got {_shown(value)}", path, where)
        elif isinstance(node, S.Date):
            self._date(value, path, where)
        elif isinstance(node, S.Seq):
            if not isinstance(value, list):
                self.error(f"expected a list, got {_shown(value)}", path, where)
                return
            for index, item in enumerate(value):
                at = value.where(index) if isinstance(value, LList) else where
                self.walk(item, node.item, f"{path}[{index}]", at)
        elif isinstance(node, S.Dict | S.Obj):
            self._mapping(value, node, path, where)
        elif isinstance(node, S.OneOf):
            self._one_of(value, node, path, where)

    def _str(self, value: object, node: S.Str, path: str, where: Loc) -> None:
        if not isinstance(value, str):
            hint = f"one of {', '.join(node.enum)}" if node.enum else node.hint
            quote = (
                " (quote it: YAML reads on/off/yes/no as booleans)"
                if isinstance(value, bool)
                else ""
            )
            self.error(f"expected {hint}, got {_shown(value)}{quote}", path, where)
            return
        if node.enum is not None and value not in node.enum:
            hint = did_you_mean(value, node.enum)
            if node.what:
                self.error(f"unknown {node.what} {value!r}{hint}", path, where)
            else:
                self.error(f"expected one of {', '.join(node.enum)}, got {value!r}", path, where)
            return
        if node.pattern is not None and not re.search(node.pattern, value):
            self.error(f"expected {node.hint}, got {value!r}", path, where)
            return
        if node.ref == "capability":
            self.capability_refs.append(_Ref(path, value, where))
        elif node.ref == "suite_path" and not value.strip():
            self.error("expected a path, got an empty string", path, where)
        elif node.ref == "path":
            if value.startswith("/") or re.match(r"^[A-Za-z]:", value):
                self.error(f"must be relative to the repository, got {value!r}", path, where)
            elif posixpath.normpath(value).split("/")[0] == "..":
                self.error(f"path escapes the repository: {value!r}", path, where)

    def _date(self, value: object, path: str, where: Loc) -> None:
        if isinstance(value, datetime.datetime):
            self.error(f"expected a date like 2026-06-30, got a date and time {value}", path, where)
        elif isinstance(value, datetime.date):
            return
        elif isinstance(value, str):
            try:
                datetime.date.fromisoformat(value)
            except ValueError:
                self.error(f"expected a date like 2026-06-30, got {value!r}", path, where)
        else:
            self.error(f"expected a date like 2026-06-30, got {_shown(value)}", path, where)

    def _mapping(self, value: object, node: S.Dict | S.Obj, path: str, where: Loc) -> None:
        if not isinstance(value, dict):
            self.error(f"expected a mapping, got {_shown(value)}", path, where)
            return
        for key, item in value.items():
            sub = f"{path}.{key}" if path else key
            at = value.where(key) if isinstance(value, LDict) else where
            if isinstance(node, S.Obj):
                if key not in node.fields:
                    self.error(f"unknown key{did_you_mean(key, list(node.fields))}", sub, at)
                    continue
                self.walk(item, node.fields[key], sub, at)
                continue
            keys = node.keys
            if keys.enum is not None and key not in keys.enum:
                self.error(f"unknown {keys.what or 'key'}{did_you_mean(key, keys.enum)}", sub, at)
                continue
            if keys.pattern is not None and not re.search(keys.pattern, key):
                self.error(f"invalid key: expected {_key_hint(keys)}", sub, at)
                continue
            self.walk(item, node.value, sub, at)
        if isinstance(node, S.Obj):
            for name in node.required:
                if name not in value:
                    self.error("missing required key", f"{path}.{name}" if path else name, where)

    def _one_of(self, value: object, node: S.OneOf, path: str, where: Loc) -> None:
        attempts: list[_Walker] = []
        for option in node.options:
            trial = _Walker()
            trial.walk(value, option, path, where)
            if not trial.errors:
                self.capability_refs.extend(trial.capability_refs)
                return
            attempts.append(trial)
        # Report the option of the same shape, so `{atl: 1}` says "unknown key".
        for option, trial in zip(node.options, attempts, strict=True):
            if (isinstance(value, dict) and isinstance(option, S.Obj | S.Dict)) or (
                isinstance(value, str) and isinstance(option, S.Str) and not _is_enum_of_one(option)
            ):
                self.errors.extend(trial.errors)
                return
        self.error(f"expected {node.hint}, got {_shown(value)}", path, where)


def _is_enum_of_one(node: S.Str) -> bool:
    return node.enum is not None and len(node.enum) == 1


def _key_hint(keys: S.Str) -> str:
    if keys.pattern == S.IDENT:
        return "lower-case letters, digits and _"
    return keys.hint


def _hint(node: S.Type) -> str:
    if isinstance(node, S.Str):
        return node.hint
    if isinstance(node, S.OneOf):
        return node.hint
    return {
        S.Int: "an integer",
        S.Num: "a number",
        S.Bool: "true or false",
        S.Date: "a date like 2026-06-30",
        S.Seq: "a list",
    }.get(type(node), "a mapping")


def _shown(value: object) -> str:
    kind = type_name(value)
    if kind in ("string", "number", "boolean"):
        return f"{kind} {value!r}" if kind != "boolean" else f"{str(value).lower()}"
    return f"a {kind}"


def check_types(merged: LDict) -> tuple[list[ConfigError], list[_Ref]]:
    walker = _Walker()
    walker.walk(merged, S.MATRIX, "", merged.at)
    return walker.errors, walker.capability_refs
