"""Newline-delimited framing, sans-I/O: bytes in, complete lines out.

MCP's stdio transport (and any line-based shell around :class:`~gcfkit.proxy.ProxyCore`) is
one JSON-RPC message per LF-terminated line. :class:`LineBuffer` is that framing on its own,
like h11's receive buffer: a shell feeds it whatever chunks it reads and gets back the
complete lines, each with its LF; :meth:`LineBuffer.close` hands over a final line that had
no LF. It never rescans bytes it has already searched and joins a line's chunks once, when
the line is complete, so a 64 MB message costs one pass, not one per chunk.

>>> buffer = LineBuffer()
>>> buffer.feed(b'{"a":1}\\n{"b"'), buffer.feed(b":2}\\n{"), buffer.close()
([b'{"a":1}\\n'], [b'{"b":2}\\n'], b'{')
"""

from __future__ import annotations

__all__ = ["LineBuffer"]


class LineBuffer:
    """Splits a byte stream into LF-terminated lines (the LF kept)."""

    __slots__ = ("_buffered", "_parts")

    def __init__(self) -> None:
        # The chunks of the line not yet complete; none of them holds an LF.
        self._parts: list[bytes] = []
        self._buffered = 0

    @property
    def buffered(self) -> int:
        """How many bytes of an incomplete line are held (a shell may bound this)."""
        return self._buffered

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data``; return the lines it completes, in order.

        >>> buffer = LineBuffer()
        >>> buffer.feed(b"x"), buffer.buffered, buffer.feed(b"y\\n\\n")
        ([], 1, [b'xy\\n', b'\\n'])
        """
        lines: list[bytes] = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            if self._parts:
                self._parts.append(data[start : end + 1])
                lines.append(b"".join(self._parts))
                self._parts = []
                self._buffered = 0
            else:
                lines.append(data[start : end + 1])
            start = end + 1
        if start < len(data):
            self._parts.append(data[start:] if start else data)
            self._buffered += len(data) - start
        return lines

    def close(self) -> bytes | None:
        """End of stream: the final line that had no LF, or None when there is none.

        >>> buffer = LineBuffer()
        >>> buffer.feed(b"done\\n"), buffer.close()
        ([b'done\\n'], None)
        """
        if not self._parts:
            return None
        line = b"".join(self._parts)
        self._parts = []
        self._buffered = 0
        return line
