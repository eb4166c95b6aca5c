"""``gcfkit ui``: a local web page with a playground and the savings dashboard.

:mod:`gcfkit.ui.playground` measures what the page's playground shows (the same comparison
as ``gcfkit stats FILE``); :mod:`gcfkit.ui.app` is the Starlette application (its JSON API,
the page and its scripts, all shipped in the package); :mod:`gcfkit.ui.server` serves it on
loopback with uvicorn.
"""
