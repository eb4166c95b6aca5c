"""Measurements: what a value costs in each format (:mod:`.report`), and what the proxy
saved according to its ledger (:mod:`.savings`)."""
