"""GCF for the MCP SDK: helpers for server authors (:mod:`gcfkit.mcp.server`) and for
clients (:mod:`gcfkit.mcp.client`). Both need the ``gcfkit[mcp]`` extra; the proxy itself
lives in :mod:`gcfkit.proxy` and needs no SDK."""
