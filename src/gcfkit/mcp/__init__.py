"""MCP integration: the GCF proxy (sans-I/O core, policy, stdio transport) and the ledger.

The proxy needs the ``gcfkit[mcp]`` extra only for its end-to-end tests and the demo; the
core itself is plain Python. Run it with ``gcfkit proxy -- COMMAND [ARGS...]``.

>>> from gcfkit.mcp import ProxyCore, ProxyConfig
>>> ProxyCore(ProxyConfig(format="json")).session_format
'json'
"""

from __future__ import annotations

from .core import Codec, Output, ProxyConfig, ProxyCore
from .policy import Policy, ToolPolicy, load_policy

__all__ = ["Codec", "Output", "Policy", "ProxyConfig", "ProxyCore", "ToolPolicy", "load_policy"]
