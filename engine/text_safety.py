"""Text from files and other hosts, made safe to show: one function for the terminal, one for Rich.

A log, a fleet report, a library name or an imported cache's host is text someone else wrote. Its
control characters are shown, never obeyed: ``ESC ] 0 ; title BEL`` would set the terminal's title,
``ESC [ 2 J`` clear the screen, ``ESC ] 52`` write the clipboard. ``visible`` writes each control
character as a visible escape (``\\x1b``, ``\\n`` where a line break is not wanted), and ``for_rich``
also escapes Rich markup, so ``[bold]`` is printed as written, not applied. The CLI's printing
helpers and the cockpit's widgets call these where such text is shown; engine modules that take in
text from elsewhere (troubleshooting evidence, fleet reports, ldd output) store it already visible.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""C0 controls but tab and newline, DEL, C1 controls (U+009B is CSI on its own in some terminals),
the Unicode line/paragraph separators and the bidirectional overrides that reorder shown text."""
_CONTROL_ALL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""As ``_CONTROL``, tab and newline included: for one-line fields (a host name, a file name)."""
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape_char(m: re.Match[str]) -> str:
    c = m.group()
    if c in _NAMED:
        return _NAMED[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def visible(text: object, *, one_line: bool = False) -> str:
    """``text`` (made a string) with every control character written as a visible escape:
    ``\\x1b`` for ESC, ``\\x07`` for BEL, ``\\x9b`` for CSI. Tabs and newlines stay unless
    ``one_line`` (a name, a host: there a newline would forge a line of output)."""
    s = text if isinstance(text, str) else str(text)
    pattern = _CONTROL_ALL if one_line else _CONTROL
    return pattern.sub(_escape_char, s) if pattern.search(s) else s


def escape_markup(text: str) -> str:
    """Rich markup in ``text`` escaped (``rich.markup.escape``)."""
    from rich.markup import escape

    return escape(text)


def for_rich(text: object, *, one_line: bool = False) -> str:
    """``visible(text)`` with Rich markup escaped: safe inside a string Rich reads as markup."""
    return escape_markup(visible(text, one_line=one_line))


def has_control(text: str) -> bool:
    """True when ``text`` holds a character ``visible(..., one_line=True)`` would escape."""
    return bool(_CONTROL_ALL.search(text))
