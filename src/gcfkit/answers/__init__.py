"""The answer layer: what a client receives for a value, shared by the proxy
(:mod:`gcfkit.proxy`) and the server helpers (:mod:`gcfkit.mcp.server`).

* :mod:`~gcfkit.answers.choose`: the one answer policy (GCF, dense, JSON, a delta,
  ``unchanged``, a relative answer or the original: the fewest tokens wins, verified first);
* :mod:`~gcfkit.answers.forms`: the full GCF forms of a value, each explained and checked;
* :mod:`~gcfkit.answers.since`: relative answers (which results are named, what ``_since``
  gets);
* :mod:`~gcfkit.answers.codec`: the encoder, decoder and counter it all runs on;
* :mod:`~gcfkit.answers.primer` (what a reader is told, and where) and
  :mod:`~gcfkit.answers.pyliteral` (Python-literal results).

It does no I/O and imports nothing above the codec.
"""
