"""The terminal the grader writes to: text it cannot carry is spelled in ASCII.

A console whose encoding lacks a character (Windows' cp1252 when the output is piped,
PYTHONIOENCODING=ascii, ...) would raise UnicodeEncodeError on the report's marks, rich's
boxes and spinner, or the mathematics a diagnosis quotes. `python -m grader` makes its
streams fall back before it prints anything (the 'grading...' spinner among it); no
torch is imported here, so that happens at once.
"""

from __future__ import annotations

import codecs
import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

# What such a console shows instead: the report's own marks, rich's boxes and spinner,
# and the mathematics that diagnoses and lessons quote. Anything else falls back to its
# ASCII decomposition ('é' -> 'e'), then to '?': printing never raises.
ASCII_FALLBACKS = {
    "\u2713": "ok", "\u2714": "ok", "\u2717": "x", "\u2718": "x", "\u2014": "-", "\u2013": "-", "\u2212": "-",
    "\u2026": "...", "\u21b3": "->", "\u2192": "->", "\u2190": "<-", "\u21d2": "=>", "\u2248": "~",
    "\u2264": "<=", "\u2265": ">=", "\u2260": "!=", "\u00b1": "+-", "\u00d7": "x", "\u00b7": ".", "\u2022": "*",
    "\u221a": "sqrt", "\u221e": "inf", "\u2202": "d", "\u00bd": "1/2", "\u00b2": "^2", "\u00b3": "^3",
    "\u2074": "^4", "\u207b": "^-", "\u2080": "0", "\u2081": "1", "\u2082": "2", "\u1d40": "^T", "\u2032": "'", "\u0302": "^",
    "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u03a6": "Phi", "\u03c6": "phi",
    "\u03a3": "Sum", "\u03c3": "sigma", "\u03b3": "gamma", "\u03b2": "beta", "\u03b5": "eps",
    "\u03b8": "theta", "\u03c0": "pi", "\u03c4": "tau", "\u03bc": "mu", "\u03b1": "alpha", "\u03bb": "lambda",
}
ASCII_FALLBACKS.update({c: "-" for c in "\u2500\u2501\u2504\u2505\u254c\u254d\u2574\u2576\u2578\u257a"})
ASCII_FALLBACKS.update({c: "=" for c in "\u2550"})
ASCII_FALLBACKS.update({c: "|" for c in "\u2502\u2503\u2506\u2507\u2551\u2575\u2577\u2579\u257b"})
ASCII_FALLBACKS.update({chr(code): "+" for code in range(0x250c, 0x254c)})
ASCII_FALLBACKS.update({chr(code): "+" for code in range(0x2552, 0x256d)})
ASCII_FALLBACKS.update({c: "+" for c in "\u256d\u256e\u256f\u2570"})
ASCII_FALLBACKS.update({chr(code): "." for code in range(0x2800, 0x2900)})  # rich's spinner
# What the report prints that a console must carry for it to be shown as it is.
_REPORT_GLYPHS = "\u2713\u2717\u21b3\u2192\u2212\u2500\u2502\u256d\u280b"
FALLBACK_ERRORS = "hero_transformer.ascii_fallback"


def _ascii_fallback(error: UnicodeError):
    if not isinstance(error, UnicodeEncodeError):
        raise error
    shown = []
    for character in error.object[error.start:error.end]:
        spelled = ASCII_FALLBACKS.get(character)
        if spelled is None:
            spelled = unicodedata.normalize("NFKD", character).encode("ascii", "ignore").decode("ascii") or "?"
        shown.append(spelled)
    return "".join(shown), error.end


codecs.register_error(FALLBACK_ERRORS, _ascii_fallback)


def carries_the_report(encoding: str | None) -> bool:
    """Whether text in this encoding can hold the report's marks and boxes."""
    try:
        _REPORT_GLYPHS.encode(encoding or "utf-8")
        return True
    except (UnicodeEncodeError, LookupError):
        return False


def safe_stream(stream) -> None:
    """Make a text stream whose encoding cannot carry the report spell what it lacks in
    ASCII (ASCII_FALLBACKS) instead of raising UnicodeEncodeError. A no-op on UTF-8, on
    streams without an encoding (StringIO, a notebook's output) and on those that
    already fall back."""
    encoding = getattr(stream, "encoding", None)
    reconfigure = getattr(stream, "reconfigure", None)
    if encoding is None or reconfigure is None or carries_the_report(encoding):
        return
    if getattr(stream, "errors", None) == FALLBACK_ERRORS:
        return
    try:
        reconfigure(errors=FALLBACK_ERRORS)
    except (ValueError, TypeError, OSError, AttributeError):
        pass


def safe_console(console: "Console") -> "Console":
    """The console, writing to a stream that never raises for a character its encoding
    lacks. Rich itself draws boxes in ASCII once the encoding is not UTF-8."""
    safe_stream(console.file)
    return console
