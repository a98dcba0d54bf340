"""pytest's argv read as pytest reads it: which words are targets, which are options, and
which option takes the next word as its value. Only pytest's own parser knows that
(``--deselect X``, ``-p X``, ``--timeout X`` of pytest-timeout), so the table of options
comes from it, with the options of the plugins installed here; guessing from the words
made a value a test target and left its flag dangling. An option no parser here knows is
read as a flag and said so (:attr:`Arg.known`), never guessed.

pytest is imported inside :func:`option_table` only: ``harness --help`` starts without it.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from _pytest.config.argparsing import Parser
# argparse's nargs: None one value, 0 a flag, N that many, "?" one if one follows, "*"/"+"
# every word up to the next option.
Nargs = int | str | None
NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # a negative number is a word, not an option


@dataclass(frozen=True, kw_only=True)
class Arg:
    """One target or one option, with the words that say it (as written, so the suite
    plans the same argv; a value stays beside its flag)."""

    words: tuple[str, ...]
    option: str = ""  # the option string; "" for a target
    value: str | None = None  # the option's value (the last, for nargs "*"); None: a flag
    known: bool = True  # False: no parser here has this option; read as a flag
    missing: bool = False  # True: the option takes a value and none follows


@functools.lru_cache(maxsize=1)
def option_table() -> Mapping[str, Nargs]:
    """{option string: nargs} of pytest and the plugins installed here (their ``pytest11``
    entry points: pytest-timeout's ``--timeout``, xdist's ``-n``)."""
    from _pytest.config import get_config

    config = get_config()
    # a plugin that fails to load: its options are named as unknown, one line each
    with contextlib.suppress(Exception):
        config.pluginmanager.load_setuptools_entrypoints("pytest11")
    return {name: action.nargs for action in _argparser(config._parser)._actions
            for name in action.option_strings}


@runtime_checkable
class _ParserBefore9(Protocol):
    """pytest 8's ``Parser``: it builds its argparse parser on demand."""

    def _getparser(self) -> argparse.ArgumentParser: ...


def _argparser(parser: Parser) -> argparse.ArgumentParser:
    """The argparse parser behind pytest's: ``optparser`` (pytest 9), else built."""
    if hasattr(parser, "optparser"):
        return parser.optparser
    if not isinstance(parser, _ParserBefore9):
        raise AttributeError("'Parser' object has no attribute '_getparser'")
    return parser._getparser()


def option_like(word: str) -> bool:
    """A word argparse reads as an option (not ``-``, not a negative number)."""
    return word.startswith("-") and len(word) > 1 and not NUMBER.match(word)


def read_argv(words: Sequence[str], table: Mapping[str, Nargs]) -> list[Arg]:
    """The words (after ``pytest``) as targets and options, in order."""
    out: list[Arg] = []
    at = 0
    while at < len(words):
        word = words[at]
        at += 1
        if word == "--":  # the rest are targets, whatever they look like
            out += [Arg(words=(w,)) for w in words[at:]]
            break
        if not option_like(word):
            out.append(Arg(words=(word,)))
            continue
        args, at = _option(word, words, at, table)
        out += args
    return out


def _option(word: str, words: Sequence[str], at: int,
            table: Mapping[str, Nargs]) -> tuple[list[Arg], int]:
    """One option word (and the words its value takes), as argparse matches it: the
    whole word, ``--opt=value``, then a short option's attached value or flags."""
    name, eq, attached = word.partition("=")
    if word in table:
        return _valued(word, (word,), None, words, at, table[word])
    if eq and name in table:
        return [Arg(words=(word,), option=name, value=attached)], at
    if not word.startswith("--") and word[:2] in table:
        return _short(word, words, at, table)
    if " " in word:  # argparse: an unknown word with a space is a target
        return [Arg(words=(word,))], at
    return [Arg(words=(word,), option=name, known=False)], at


def _valued(option: str, head: tuple[str, ...], attached: str | None, words: Sequence[str],
            at: int, nargs: Nargs) -> tuple[list[Arg], int]:
    """``option`` with the value attached to it, else the following words it takes."""
    if attached:
        return [Arg(words=(*head[:-1], head[-1] + attached), option=option,
                    value=attached)], at
    taken = _takes(nargs, words[at:])
    if nargs == 0 or (nargs == "?" and not taken):
        return [Arg(words=head, option=option)], at
    if not taken:
        return [Arg(words=head, option=option, missing=True)], at
    values = tuple(words[at:at + taken])
    return [Arg(words=(*head, *values), option=option, value=values[-1])], at + taken


def _takes(nargs: Nargs, following: Sequence[str]) -> int:
    """How many of the following words an option of this nargs takes as its value."""
    if nargs is None:
        return min(1, len(following))
    if isinstance(nargs, int):
        return min(nargs, len(following))
    count = 0
    while count < len(following) and not option_like(following[count]):
        count += 1
    return min(count, 1) if nargs == "?" else count


def _short(word: str, words: Sequence[str], at: int,
           table: Mapping[str, Nargs]) -> tuple[list[Arg], int]:
    """``-vs`` (flags), ``-kEXPR`` / ``-n2`` (a value attached), ``-vk EXPR`` (flags, then
    an option whose value is the rest of the word or the next word)."""
    flags = ""
    for pos in range(1, len(word)):
        option = "-" + word[pos]
        if option not in table:  # argparse stops with a usage error: name it, keep it
            return [Arg(words=(word,), option=word, known=False)], at
        if table[option] == 0:
            flags += word[pos]
            continue
        before = [Arg(words=("-" + flags,), option="-" + flags[0])] if flags else []
        args, at = _valued(option, (option,), word[pos + 1:], words, at, table[option])
        return before + args, at
    return [Arg(words=(word,), option="-" + flags[0])], at
