"""splice_texts: a rewritten result's new block texts written into the server's line, every
other byte kept, and None wherever that could not be done exactly (dump_edited then)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gcfkit.proxy.content import edited_line
from gcfkit.proxy.jsonrpc import parse_envelope, splice_texts

# Again on the pure-Python codec (make test): the reference finds the texts' members there.
pytestmark = pytest.mark.pure


def edit(line: bytes, texts: dict[int, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    msg, safe = parse_envelope(line)
    assert safe
    old = msg["result"]
    content = [
        {**block, "text": texts[i]} if i in texts else block
        for i, block in enumerate(old["content"])
    ]
    return msg, {**old, "content": content}


def same_as_dumped(line: bytes, msg: dict[str, Any], new: dict[str, Any]) -> bytes:
    out = splice_texts(line, msg, new)
    assert out is not None
    assert out.endswith(b"\n") and out.count(b"\n") == 1
    assert json.loads(out) == json.loads(edited_line(msg, new, line))
    return out


def test_every_other_byte_is_the_servers() -> None:
    line = (
        b'{ "jsonrpc" : "2.0", "id": 7, "result": {"content": [{"type": "text",\t"text" :'
        b' "[1, 2]"}, {"type": "image", "data": "x"}], "n": -0, "m": 1E2, "s": "\\u00e9"}}\r\n'
    )
    msg, new = edit(line, {0: "[1,2]"})
    out = same_as_dumped(line, msg, new)
    assert out == line.replace(b'"[1, 2]"', b'"[1,2]"').rstrip() + b"\n"


def test_new_text_is_written_as_the_dump_writes_strings() -> None:
    line = json.dumps({"id": 1, "result": {"content": [{"type": "text", "text": "a"}]}}).encode()
    msg, new = edit(line, {0: 'GCF "é"\n\\ \udc80'})
    out = same_as_dumped(line, msg, new)
    assert b'"GCF \\"\xc3\xa9\\"\\n\\\\ \\udc80"' in out


def test_several_blocks() -> None:
    blocks = [{"type": "text", "text": f"[{i}, {i}]"} for i in range(3)]
    line = json.dumps({"id": 1, "result": {"content": blocks}}).encode()
    msg, new = edit(line, {0: "[0,0]", 2: "[2,2]"})
    out = same_as_dumped(line, msg, new)
    assert json.loads(out)["result"]["content"][1]["text"] == "[1, 1]"


def test_text_members_inside_strings_are_not_members() -> None:
    inner = json.dumps({"text": "[1, 2]"})  # the old text as a member inside a string
    line = json.dumps(
        {"id": 1, "result": {"content": [{"type": "text", "text": "[1, 2]"}], "note": inner}}
    ).encode()
    msg, new = edit(line, {0: "[1,2]"})
    assert b'"note": "{\\"text\\": \\"[1, 2]\\"}"' in same_as_dumped(line, msg, new)


def test_a_text_ending_in_a_backslash() -> None:
    line = json.dumps(
        {
            "id": 1,
            "result": {
                "content": [{"type": "text", "text": "a\\"}, {"type": "text", "text": "[1, 2]"}]
            },
        }
    ).encode()
    msg, new = edit(line, {1: "[1,2]"})
    same_as_dumped(line, msg, new)


@pytest.mark.parametrize(
    "line",
    [
        # A member named "text" spelled with an escape.
        b'{"id":1,"result":{"content":[{"type":"text","te\\u0078t":"[1, 2]"}]}}',
        b'{"id":1,"result":{"content":[{"type":"text","text":"[1, 2]"}],'
        b'"structuredContent":{"\\u0074ext":"[1, 2]"}}}',
    ],
)
def test_left_to_the_dump_when_not_exact(line: bytes) -> None:
    msg, new = edit(line, {0: "[1,2]"})
    assert splice_texts(line, msg, new) is None


def test_the_old_text_as_another_members_value_too() -> None:
    """Members are matched to blocks by their place in the message, not by their text: the
    same text elsewhere (here before and after the block) is left alone."""
    line = (
        b'{"id":1,"result":{"_meta":{"text":"[1, 2]"},"content":[{"type":"text","text":'
        b'"[1, 2]"}],"structuredContent":{"text":"[1, 2]","more":[{"text":"[1, 2]"}]}}}'
    )
    msg, new = edit(line, {0: "[1,2]"})
    out = same_as_dumped(line, msg, new)
    assert out == line.replace(b'"text":"[1, 2]"}]', b'"text":"[1,2]"}]', 1) + b"\n"


def test_a_member_named_text_that_holds_no_string_leaves_it_to_the_dump() -> None:
    line = b'{"id":1,"result":{"content":[{"type":"text","text":"[1, 2]"}],"x":{"text":5}}}'
    msg, new = edit(line, {0: "[1,2]"})
    assert splice_texts(line, msg, new) is None


def test_left_to_the_dump_when_more_than_texts_change() -> None:
    line = b'{"id":1,"result":{"content":[{"type":"text","text":"[1, 2]"}]}}'
    msg, _ = parse_envelope(line)
    old = msg["result"]
    block = old["content"][0]
    for new in (
        {**old, "content": []},  # a block removed
        {**old, "content": [{"type": "text", "text": "ref=1"}, block]},  # added before
        {**old, "content": [{**block, "text": "[1,2]", "annotations": {}}]},
        {**old, "content": [{**block, "text": "[1,2]"}], "isError": False},
        {**old, "content": [{**block, "type": "image", "text": "[1,2]"}]},
        {**old, "content": [block]},  # nothing changed
        {**old, "content": [{**block, "text": 1}]},
    ):
        assert splice_texts(line, msg, new) is None, new
    assert splice_texts(line, msg, {**old, "content": [{**block, "text": "[1,2]"}]}) is not None


def test_an_added_block_goes_before_the_content_arrays_bracket() -> None:
    line = (
        b'{"jsonrpc": "2.0", "id": 3, "result": {"structuredContent": {"content": ["]"]},'
        b' "content" : [ {"type": "text", "text": "[1, 2]", "annotations": {"a": ["]}"]}} ]'
        b' , "isError": false}}\n'
    )
    msg, _ = parse_envelope(line)
    old = msg["result"]
    block = old["content"][0]
    ref = {"type": "text", "text": "ref=r1 \u00e9"}
    new = {**old, "content": [{**block, "text": "[1,2]"}, ref]}
    out = same_as_dumped(line, msg, new)
    assert out == line.replace(b'"[1, 2]"', b'"[1,2]"').replace(
        b"]}} ]", b']}} ,{"type":"text","text":"ref=r1 \xc3\xa9"}]'
    )
    # Only added: the old texts are not looked for at all.
    out = same_as_dumped(line, msg, {**old, "content": [block, ref, ref]})
    dumped = json.dumps(ref, ensure_ascii=False, separators=(",", ":")).encode()
    assert out.endswith(b"]}} ," + dumped + b"," + dumped + b'] , "isError": false}}\n')


def test_a_block_added_to_an_empty_content_array() -> None:
    line = b'{"id":1,"result":{"content":[ ]}}'
    msg, _ = parse_envelope(line)
    new = {**msg["result"], "content": [{"type": "text", "text": "ref=1"}]}
    assert same_as_dumped(line, msg, new) == (
        b'{"id":1,"result":{"content":[ {"type":"text","text":"ref=1"}]}}\n'
    )


def test_an_added_block_after_members_spelled_with_escapes() -> None:
    # Member names are read as JSON reads them: an escaped name is still its name.
    line = b'{"i\\u0064":1,"\\u0072esult":{"\\u0063ontent":[{"type":"text","text":"a"}]}}'
    msg, _ = parse_envelope(line)
    old = msg["result"]
    new = {**old, "content": [*old["content"], {"type": "text", "text": "ref=1"}]}
    out = same_as_dumped(line, msg, new)
    assert out == line[:-3] + b',{"type":"text","text":"ref=1"}]}}\n'


def test_an_added_block_to_a_message_that_is_not_one_object() -> None:
    line = b'[{"id":1,"result":{"content":[{"type":"text","text":"a"}]}}]'
    msg = json.loads(line)[0]
    old = msg["result"]
    new = {**old, "content": [*old["content"], {"type": "text", "text": "ref=1"}]}
    assert splice_texts(line, msg, new) is None


@pytest.mark.parametrize("edited", [(0,), (1,), (0, 1), ()])
def test_an_added_block_after_blocks_edited_or_not(edited: tuple[int, ...]) -> None:
    line = (
        b'{"id":1,"result":{"content":[{"type":"text","text":"[1, 2]","n":{"t":"]"}},'
        b'{"text":"[3, 4]" , "type":"text" ,"_meta":{"a":[1,{"b":"}"}]}}\t] ,"x":[]}}\n'
    )
    msg, new = edit(line, {i: f"[{2 * i + 1},{2 * i + 2}]" for i in edited})
    ref = {"type": "text", "text": "ref=1"}
    new = {**new, "content": [*new["content"], ref]}
    out = same_as_dumped(line, msg, new)
    assert out.endswith(b'"}"}]}}\t,{"type":"text","text":"ref=1"}] ,"x":[]}}\n')
