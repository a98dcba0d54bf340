"""Markdown escaping for quoted text (failure messages, test ids, names) in report.md.

Text quoted from a test run is untrusted: a failure message may hold ``<img>`` tags,
links, ``@org/team`` mentions or table pipes. Two escapers:

- :func:`code` puts it in an inline code span (a backtick fence longer than any run
  inside it), where Markdown, HTML, autolinks and mentions are all inert;
- :func:`text` backslash-escapes Markdown punctuation, writes ``<``/``>``/``&`` as
  entities and breaks ``@`` mentions with a zero-width space, for prose.

Both fold newlines into spaces and cut to a length, so one item stays one line.
"""

from __future__ import annotations

import re

from markupsafe import Markup

LIMIT = 160
# Inline text never starts a line here, so block markers (#, -, +, 1.) need no escape;
# with [ and ] escaped no link can form, so ( and ) stay as they are.
_PUNCT = re.compile(r"([\\`*_\[\]|~])")
_FENCE = re.compile(r"`+")
ZWSP = "\u200b"


def _one_line(value: object, limit: int) -> str:
    line = " ".join(str(value).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def text(value: object, limit: int = LIMIT) -> Markup:
    """Prose-safe Markdown: punctuation escaped, HTML as entities, mentions broken."""
    line = _one_line(value, limit)
    line = line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    line = _PUNCT.sub(r"\\\1", line)
    line = line.replace("@", "@" + ZWSP)
    return Markup(line)


def link(label: object, url: str) -> Markup:
    """``[label](url)``: a Markup label (e.g. a code span) is kept, other text escaped."""
    shown = label if isinstance(label, Markup) else text(label)
    target = url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")
    return Markup(f"[{shown}]({target})")


def code(value: object, limit: int = LIMIT) -> Markup:
    """An inline code span holding ``value`` verbatim (one line)."""
    line = _one_line(value, limit)
    longest = max((len(run) for run in _FENCE.findall(line)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if line.startswith("`") or line.endswith("`") or not line.strip() else ""
    # Items are list lines, not table cells, so a pipe inside the span stays as it is.
    return Markup(f"{fence}{pad}{line}{pad}{fence}")
