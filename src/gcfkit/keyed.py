"""Keyed sets and generic deltas (spec §10a), re-exported: the names API.md promises.

They live in :mod:`gcfkit.generic.delta` (sets, pack roots, deltas) and
:mod:`gcfkit.generic.session` (the producer's :class:`DeltaSession`), next to the generic
encoder and decoder they are built on, as :mod:`gcfkit.graph` keeps its own.

>>> base = KeyedSet("id", ["id", "v"], [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}])
>>> new = KeyedSet("id", ["id", "v"], [{"id": 1, "v": "A"}, {"id": 3, "v": "c"}])
>>> delta = diff(base, new)
>>> print(dumps_delta(delta), end="")  # doctest: +ELLIPSIS
GCF profile=generic delta=true base_root=sha256:... new_root=sha256:... key=id
## added [1]{@id,v}
3|c
## changed [1]{@id,v}
1|A
## removed [1]{@id}
2
>>> pack_root(apply_delta(base, loads_delta(dumps_delta(delta)))) == pack_root(new)
True
"""

from __future__ import annotations

from .generic.delta import (
    GenericDelta,
    KeyedSet,
    apply_delta,
    diff,
    dumps_delta,
    dumps_full,
    dumps_unchanged,
    loads_delta,
    loads_keyed,
    pack_root,
)
from .generic.session import DeltaSession, FixedN, SizeGuard

__all__ = [
    "DeltaSession",
    "FixedN",
    "GenericDelta",
    "KeyedSet",
    "SizeGuard",
    "apply_delta",
    "diff",
    "dumps_delta",
    "dumps_full",
    "dumps_unchanged",
    "loads_delta",
    "loads_keyed",
    "pack_root",
]
