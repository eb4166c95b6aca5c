"""What the proxy did with one tool result: sizes, a decision and a duration, never content.

The sans-I/O core builds :class:`LedgerRecord` values; a shell stamps each with the wall
time when it appends it to the ledger file (:mod:`gcfkit.ledger`), so the core reads no
clock but the one it is given.

>>> r = LedgerRecord("git", "git_log", 100, 40, 30, 12, "o200k_base", "gcf", 0.5)
>>> r.tokens_saved, LedgerRecord.from_dict(r.to_dict()) == r
(18, True)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from ..answers.choose import Choice, Decision, FallbackWord

__all__ = ["LedgerDecision", "LedgerRecord", "LedgerWord", "Sizes", "ledger_decision"]

#: What became of a result, as the ledger says it, when no fallback was needed.
LedgerWord = Literal[
    "gcf",
    "dense",
    "json-minified",
    "delta",
    "unchanged-delta",
    "unchanged",
    "passthrough-file",
    "since-unchanged",
    "since-patch",
    "since-edit",
]

#: The decision the proxy writes for a result: a word, or a fallback and why
#: (:func:`~gcfkit.answers.choose.fallback_word`). A record read back from a ledger file
#: holds any string (a newer writer may have more words).
LedgerDecision = LedgerWord | FallbackWord

_STRING_FIELDS: Final = ("server", "tool", "encoding", "decision")
_INT_FIELDS: Final = ("bytes_before", "bytes_after", "tokens_before", "tokens_after")


class Sizes:
    """Sizes before and after the proxy and what they saved: one rule for a record and for any
    sum of records (:class:`gcfkit.measure.savings.Totals`).

    >>> LedgerRecord("s", "t", 100, 120, 30, 12, "o200k_base", "gcf", 0.5).bytes_saved
    -20
    """

    bytes_before: int
    bytes_after: int
    tokens_before: int
    tokens_after: int

    @property
    def tokens_saved(self) -> int:
        """Tokens kept out of the context: ``tokens_before - tokens_after`` (negative if the
        result grew)."""
        return self.tokens_before - self.tokens_after

    @property
    def bytes_saved(self) -> int:
        """Bytes kept off the wire: ``bytes_before - bytes_after`` (negative if the result
        grew)."""
        return self.bytes_before - self.bytes_after


@dataclass(frozen=True)
class LedgerRecord(Sizes):
    """What the proxy did with one tool result; sizes and a decision, never content.

    ``decision`` is a short word: ``gcf``, ``json-minified``, ``unchanged``,
    ``passthrough-file``, ``delta``, ``unchanged-delta``, ``since-unchanged``,
    ``since-patch``, ``since-edit`` (relative answers) or ``fallback:<reason>``.
    ``encoding`` names the tokenizer the token counts come from (e.g. ``o200k_base``);
    ``encode_ms`` is how long the proxy spent on the result.
    """

    server: str
    tool: str
    bytes_before: int
    bytes_after: int
    tokens_before: int
    tokens_after: int
    encoding: str
    decision: str
    encode_ms: float

    def to_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict, in ledger-line order."""
        return {
            "server": self.server,
            "tool": self.tool,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "encoding": self.encoding,
            "decision": self.decision,
            # A NaN timing must not make the line invalid JSON for every later reader.
            "encode_ms": round(self.encode_ms, 3) if math.isfinite(self.encode_ms) else 0.0,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LedgerRecord:
        """Validate and build a record; unknown keys are ignored (newer writers may add some).

        Raises ``ValueError`` on a missing or mistyped field.
        """
        strings = {}
        for key in _STRING_FIELDS:
            value = data.get(key)
            if not isinstance(value, str):
                raise ValueError(f"field {key!r} is not a string")
            strings[key] = value
        ints = {}
        for key in _INT_FIELDS:
            value = data.get(key)
            # bool is an int subclass but never a size.
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"field {key!r} is not an integer")
            ints[key] = value
        ms = data.get("encode_ms")
        if not isinstance(ms, (int, float)) or isinstance(ms, bool) or not math.isfinite(ms):
            raise ValueError("field 'encode_ms' is not a number")
        return cls(
            server=strings["server"],
            tool=strings["tool"],
            bytes_before=ints["bytes_before"],
            bytes_after=ints["bytes_after"],
            tokens_before=ints["tokens_before"],
            tokens_after=ints["tokens_after"],
            encoding=strings["encoding"],
            decision=strings["decision"],
            encode_ms=float(ms),
        )


#: The ledger's word for each answer decision.
_WORDS: Final[dict[Decision, LedgerWord]] = {
    "gcf": "gcf",
    "dense": "dense",
    "json": "json-minified",
    "delta": "delta",
    "unchanged": "unchanged-delta",
    "original": "unchanged",
    "since-unchanged": "since-unchanged",
    "since-patch": "since-patch",
    "since-edit": "since-edit",
}
_MOST_TELLING: Final[tuple[LedgerWord, ...]] = (
    "since-unchanged",
    "since-patch",
    "since-edit",
    "unchanged-delta",
    "delta",
    "dense",
    "gcf",
    "json-minified",
)


def ledger_decision(choices: Iterable[Choice]) -> LedgerDecision:
    """One ledger word for a result answered in pieces: a fallback if any piece needed one
    (the ledger must say why), else the most telling of the pieces' decisions.

    >>> from gcfkit.answers.choose import Fallback
    >>> ledger_decision([Choice(None, 3, "original"), Choice("GCF", 2, "gcf")])
    'gcf'
    >>> ledger_decision([Choice("[1]", 2, "json", (Fallback("encode", "out_of_range"),))])
    'fallback:encode-out_of_range'
    """
    words: list[LedgerWord] = []
    for choice in choices:
        if choice.fallbacks:
            return choice.fallbacks[0].word
        words.append(_WORDS[choice.decision])
    return next((w for w in _MOST_TELLING if w in words), "unchanged")
