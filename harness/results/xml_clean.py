"""Bytes a JUnit producer should not have written, made harmless before expat sees them.

XML 1.0 forbids most control characters, raw or as references (``&#0;``, ``&#x1b;``),
and a file must be valid UTF-8; one such character in a test name would otherwise stop
the parse and drop every case after it. Each is replaced with U+FFFD and counted.
"""

from __future__ import annotations

import codecs
import re

REPLACEMENT = "\ufffd"
_INVALID = re.compile(
    r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]"
    r"|&#(?:[xX]0*(?:[0-8bBcCeEfF]|1[0-9a-fA-F]|[dD][89a-fA-F][0-9a-fA-F]{2}|[fF]{3}[eEfF])"
    r"|0*(?:[0-8]|1[124-9]|2[0-9]|3[01]));"
)
_CARRY = 16  # a character reference cut by a block boundary is at most this long
_CONTROLS = bytes(c for c in range(32) if c not in (9, 10, 13))


class XmlCleaner:
    """Feed blocks of bytes; get back UTF-8 bytes with every invalid character replaced."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._carry = ""
        self.replaced = 0

    def replaced_note(self, path: object) -> str | None:
        """The warning for what was replaced in ``path`` (the file still reads); None: nothing."""
        if not self.replaced:
            return None
        return (f"{path}: {self.replaced} character(s) that are not valid XML or UTF-8 "
                "replaced with U+FFFD")

    def feed(self, block: bytes, final: bool = False) -> bytes:
        if self._plain(block, final):
            return block  # the usual block: nothing to decode, look for or re-encode
        text = self._carry + self._decoder.decode(block, final)
        self.replaced += text.count(REPLACEMENT) - self._carry.count(REPLACEMENT)
        cut = len(text)
        if not final:  # hold back a possible reference cut in two by the block boundary
            amp = text.rfind("&", max(0, len(text) - _CARRY))
            cut = amp if amp >= 0 else cut
        text, self._carry = text[:cut], text[cut:]
        clean, count = _INVALID.subn(REPLACEMENT, text)
        self.replaced += count
        return clean.encode("utf-8")

    def _plain(self, block: bytes, final: bool) -> bool:
        """True when ``block`` needs no change and leaves nothing to carry: ASCII (so
        valid UTF-8, no U+FFFE/U+FFFF), no control character, no character reference,
        no ``&`` near its end, and nothing held back from the block before."""
        if self._carry or not block.isascii() or b"&#" in block:
            return False
        if not final and b"&" in block[-_CARRY:]:
            return False
        if self._decoder.getstate()[0]:
            return False
        return len(block.translate(None, _CONTROLS)) == len(block)
