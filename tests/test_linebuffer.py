"""LineBuffer: the LF framing any shell around the proxy core reuses."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gcfkit.proxy.linebuffer import LineBuffer


def expected_lines(data: bytes) -> list[bytes]:
    parts = data.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    return [*lines, parts[-1]] if parts[-1] else lines


def framed(chunks: list[bytes]) -> list[bytes]:
    buffer = LineBuffer()
    out = [line for chunk in chunks for line in buffer.feed(chunk)]
    final = buffer.close()
    return [*out, final] if final is not None else out


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.binary(max_size=200), st.lists(st.integers(1, 23), min_size=1, max_size=40))
def test_any_chunking_gives_the_same_lines(data: bytes, cuts: list[int]) -> None:
    chunks: list[bytes] = []
    i = 0
    for n in cuts * (len(data) // max(sum(cuts), 1) + 1):
        if i >= len(data):
            break
        chunks.append(data[i : i + n])
        i += n
    assert framed(chunks) == expected_lines(data)
    assert b"".join(framed(chunks)) == data


def test_empty_chunks_and_empty_lines() -> None:
    buffer = LineBuffer()
    assert buffer.feed(b"") == [] and buffer.close() is None
    assert buffer.feed(b"\n\n") == [b"\n", b"\n"]
    assert buffer.feed(b"a") == [] and buffer.buffered == 1
    assert buffer.feed(b"") == [] and buffer.close() == b"a" and buffer.buffered == 0
    assert buffer.close() is None


def test_a_64_mb_line_in_64_kb_reads() -> None:
    line = b'{"blob":"' + b"x" * (64 * 1024 * 1024) + b'"}\n'
    buffer = LineBuffer()
    out: list[bytes] = []
    step = 64 * 1024
    for start in range(0, len(line), step):
        out += buffer.feed(line[start : start + step])
        # Nothing is joined before the line is complete: the buffer only holds the chunks.
        assert buffer.buffered == (0 if out else start + len(line[start : start + step]))
    assert out == [line] and buffer.close() is None
