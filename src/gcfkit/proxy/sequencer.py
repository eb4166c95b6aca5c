"""The order of what the server said, kept while some of it is still being rewritten.

A shell that rewrites tool results away from its event loop (:mod:`gcfkit.transports.offload`)
holds a place for each result in a :class:`Sequencer` and fills it when the answer is ready;
everything the server writes meanwhile is added behind it, ready at once. What may be
written, and when, is one rule:

* Nothing overtakes a notification, a server-to-client request or a line the proxy cannot
  read: each goes out only after everything the server wrote before it. So a result's
  progress notifications stay ahead of it, its later notifications stay behind it, and a
  server request never jumps a message it may depend on.
* A response overtakes only responses still being rewritten (a ping answered while a large
  result is encoded): responses to different requests carry no order between them in
  JSON-RPC, and the client matches them by id. It never overtakes a notification or request
  written before it (which may be its own progress).

So, for the server's ``[R1 (being rewritten), P (ping response), N (notification), R2]``,
the client gets ``P`` at once, then ``R1``, ``N``, ``R2`` in the server's order once ``R1``
is ready.

>>> seq: Sequencer[bytes] = Sequencer()
>>> big = seq.hold(response=True)
>>> seq.add(b"ping-answer\\n", response=True)
>>> seq.add(b"notification\\n", response=False)
>>> seq.ready()
[b'ping-answer\\n']
>>> seq.fill(big, b"result\\n")
>>> seq.ready()
[b'result\\n', b'notification\\n']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Sequencer"]

T = TypeVar("T")


@dataclass(slots=True)
class _Place(Generic[T]):
    ticket: int
    data: T | None  # None: still being rewritten
    response: bool


class Sequencer(Generic[T]):
    """Places for server-to-client lines, released by the rule of the module docstring.
    A line is any object the shell writes (its bytes, or the bytes and where they go)."""

    __slots__ = ("_next", "_places")

    def __init__(self) -> None:
        self._places: list[_Place[T]] = []
        self._next = 0

    @property
    def held(self) -> int:
        """How many places are still waiting for their line."""
        return sum(1 for p in self._places if p.data is None)

    def __len__(self) -> int:
        return len(self._places)

    def add(self, data: T, *, response: bool) -> None:
        """A line that is ready; ``response``: it is a JSON-RPC response (result or error)."""
        self._places.append(_Place(-1, data, response))

    def hold(self, *, response: bool = True) -> int:
        """A place for a line still being made; returns the ticket :meth:`fill` takes."""
        ticket = self._next
        self._next += 1
        self._places.append(_Place(ticket, None, response))
        return ticket

    def fill(self, ticket: int, data: T) -> None:
        """The line for ``ticket``'s place."""
        for place in self._places:
            if place.ticket == ticket and place.data is None:
                place.data = data
                return
        raise KeyError(ticket)

    def ready(self) -> list[T]:
        """Every line that may be written now, in the order to write them; they leave."""
        out: list[T] = []
        kept: list[_Place[T]] = []
        # True while every place left behind so far is a response still being rewritten.
        only_held_responses = True
        for place in self._places:
            if place.data is not None and (not kept or (only_held_responses and place.response)):
                out.append(place.data)
                continue
            kept.append(place)
            if place.data is not None or not place.response:
                only_held_responses = False
        self._places = kept
        return out
