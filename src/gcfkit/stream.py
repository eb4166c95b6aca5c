"""Streaming encoders, re-exported: :class:`GenericStreamEncoder` (spec §8).

>>> from gcfkit.stream import GenericStreamEncoder
>>> out = []
>>> with GenericStreamEncoder(out.append) as enc:
...     enc.open_table("rows", ["id"])
...     enc.row({"id": 7})
>>> "".join(out)
'GCF profile=generic\\n## rows [?]{id}\\n7\\n##! summary counts=1\\n'
"""

from __future__ import annotations

from .generic.stream import GenericStreamEncoder

__all__ = ["GenericStreamEncoder"]
