"""HTML character references in attribute values (``&quot;``, ``&#10;``, ``&#x27;``, ...),
decoded whole or as the value arrives."""

from __future__ import annotations

import html.entities
import re

__all__ = ["EntityStream", "decode_entities"]

_REF = re.compile(r"&(?:#([0-9]{1,7})|#[xX]([0-9a-fA-F]{1,6})|([A-Za-z][A-Za-z0-9]{0,31}));")
_REF_BODY = re.compile(r"[#A-Za-z0-9]*")
_REF_MAX = 33  # "&" + 32 name characters; a ";" after that cannot end a reference


def _reference(m: re.Match[str]) -> str:
    dec, hexa, name = m.groups()
    if name is not None:
        return html.entities.html5.get(name + ";", m.group(0))
    cp = int(dec) if dec is not None else int(hexa, 16)
    if cp == 0 or 0xD800 <= cp <= 0xDFFF or cp > 0x10FFFF:
        return m.group(0)
    return chr(cp)


def decode_entities(value: str) -> str:
    """Decode HTML character references that end in ``;`` (named, decimal, hex).

    Anything else — a bare ``&``, an unknown name, ``&amp`` without ``;``, a code point
    that is not a character — is kept verbatim, so decoding can be done chunk by chunk.
    """
    return _REF.sub(_reference, value) if "&" in value else value


class EntityStream:
    """Decodes a value arriving in pieces, holding back a possible unfinished reference."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held = ""

    def feed(self, s: str) -> str:
        """The decoded text of ``s`` that no later piece can change."""
        if self.held:
            s = self.held + s
            self.held = ""
        i = s.rfind("&")
        if i >= 0 and len(s) - i <= _REF_MAX and _REF_BODY.fullmatch(s, i + 1):
            self.held = s[i:]
            s = s[:i]
        return decode_entities(s)

    def flush(self) -> str:
        """The value ended: decode what was held back."""
        s, self.held = self.held, ""
        return decode_entities(s)
