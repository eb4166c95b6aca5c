"""The one prompt builder: a question about a dataset, in one format, with or without the
primer, framed as the tool result(s) an agent reads.

The system part plays the MCP server's instructions (where the proxy puts its primer); the
user part holds the tool result(s) between ``<tool_result>`` tags, then the question and a
one-line hint on the answer's form. :func:`extract_results` reads the results back (the
scripted reference server uses it).

>>> from gcfkit.eval.datasets import load_dataset
>>> from gcfkit.eval.questions import generate_questions
>>> from gcfkit.eval.formats import get_format
>>> ds = load_dataset("synthetic:records:3", seed=0)
>>> q = generate_questions(ds, kinds=["count"], per_kind=1)[0]
>>> p = build_prompt(q, ds, get_format("gcf"), primer=True)
>>> p.system.endswith(get_format("gcf").primer)
True
>>> print(p.user.splitlines()[0])
<tool_result tool="list_tickets">
>>> extract_results(p.user)[0].startswith("GCF profile=generic")
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Final

from ..errors import ConfigError
from ..jsonio import dumps_compact
from .datasets import Dataset
from .formats import EvalFormat
from .questions import Question, answer_hint, render_question, shown_value

__all__ = ["SYSTEM", "Prompt", "build_prompt", "extract_data", "extract_results"]

SYSTEM: Final = (
    "You answer questions about the results of tool calls. Read the data exactly; "
    "give only the answer asked for, with no explanation."
)
_OPEN: Final = '<tool_result tool="{tool}"{call}>'
_CLOSE: Final = "</tool_result>"
_RESULT: Final = re.compile(
    r'<tool_result tool="[^"\n]*"(?: call="\d+")?>\n(.*?)\n</tool_result>', re.S
)
_DATA: Final = re.compile(r"<data>\n(.*?)\n</data>", re.S)


@dataclass(frozen=True)
class Prompt:
    """A prompt: ``system`` (instructions, with the primer) and ``user`` (data + question)."""

    system: str
    user: str

    @property
    def text(self) -> str:
        """Both parts as one text, as a command model reads it on stdin."""
        return f"{self.system}\n\n{self.user}" if self.system else self.user


def _block(tool: str, text: str, call: int | None = None) -> str:
    if _CLOSE in text:
        raise ConfigError("invalid_option", f"a {tool} result contains {_CLOSE!r}; cannot frame it")
    head = _OPEN.format(tool=tool, call=f' call="{call}"' if call is not None else "")
    return f"{head}\n{text.rstrip(chr(10))}\n{_CLOSE}"


def build_prompt(q: Question, ds: Dataset, fmt: EvalFormat, *, primer: bool) -> Prompt:
    """The prompt asking ``q`` about ``ds`` in ``fmt`` (``primer``: with the format's primer)."""
    hint = answer_hint(q.answer_type)
    first, second = shown_value(ds, q)
    if q.query.op == "generate":
        text = render_question(replace(q.query, format=fmt.label))
        user = f"<data>\n{dumps_compact(first)}\n</data>\n\n{text}\n{hint}"
        return Prompt(_system(fmt, [], primer), user)
    if second is not None:
        t1, t2 = fmt.pair(first, second, ds.tool)
        texts = [t1, t2]
        intro = f"The tool {ds.tool} was called twice with the same arguments."
        if fmt.pair_note:
            intro = f"{intro} {fmt.pair_note}"
        body = f"{intro}\n\n{_block(ds.tool, t1, 1)}\n\n{_block(ds.tool, t2, 2)}"
    else:
        texts = [fmt.render(first, ds.tool, ds.graph)]
        body = _block(ds.tool, texts[0])
    return Prompt(_system(fmt, texts, primer), f"{body}\n\n{q.text}\n{hint}")


def _system(fmt: EvalFormat, texts: list[str], primer: bool) -> str:
    text = fmt.primer_of(texts) if primer else ""
    return f"{SYSTEM}\n\n{text}" if text else SYSTEM


def extract_results(user: str) -> list[str]:
    """The tool result texts framed in a prompt's user part, in order."""
    return [m.group(1) for m in _RESULT.finditer(user)]


def extract_data(user: str) -> str | None:
    """The ``<data>`` block of a generation prompt, or None."""
    m = _DATA.search(user)
    return m.group(1) if m else None


def question_line(user: str) -> str:
    """The question of a prompt's user part (the line before the answer hint)."""
    lines = [ln for ln in user.rstrip("\n").split("\n") if ln.strip()]
    return lines[-2] if len(lines) >= 2 else ""
