"""The kinds of value a matrix key may hold (``harness.matrix.schema`` declares the keys
with them; ``validate`` walks them; ``json_schema`` turns them into JSON Schema)."""

from __future__ import annotations

from dataclasses import dataclass, field

IDENT = r"^[a-z][a-z0-9_]*$"


@dataclass(frozen=True, kw_only=True)
class Type:
    doc: str = ""
    nullable: bool = False


@dataclass(frozen=True, kw_only=True)
class Str(Type):
    enum: tuple[str, ...] | None = None
    pattern: str | None = None
    hint: str = "a string"
    what: str | None = None  # names the value in "unknown <what> 'x'" messages
    ref: str | None = None  # "capability" (checked against the catalogue) or "path"


@dataclass(frozen=True, kw_only=True)
class Int(Type):
    minimum: int | None = None


@dataclass(frozen=True, kw_only=True)
class Num(Type):
    minimum: float | None = None


@dataclass(frozen=True, kw_only=True)
class Bool(Type):
    pass


@dataclass(frozen=True, kw_only=True)
class Date(Type):
    pass


@dataclass(frozen=True, kw_only=True)
class Seq(Type):
    item: Type


@dataclass(frozen=True, kw_only=True)
class Dict(Type):
    value: Type
    keys: Str = field(default_factory=lambda: Str(pattern=IDENT))


@dataclass(frozen=True, kw_only=True)
class Obj(Type):
    fields: dict[str, Type]
    required: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class OneOf(Type):
    options: tuple[Type, ...]
    hint: str
