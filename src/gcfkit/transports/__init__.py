"""The asyncio shells around :class:`gcfkit.proxy.ProxyCore`: the only proxy code doing I/O.

:mod:`gcfkit.transports.stdio` relays an MCP stdio server.
"""
