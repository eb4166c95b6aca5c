"""The MCP proxy's sans-I/O core: JSON-RPC lines in, the lines to write out.

Nothing here does I/O: :mod:`gcfkit.transports` holds the shells (stdio) that own processes,
pipes and the clock. Run the proxy with ``gcfkit proxy -- COMMAND [ARGS...]``.

>>> from gcfkit.proxy import ProxyCore, ProxyConfig
>>> ProxyCore(ProxyConfig(format="json")).session_format
'json'
"""

from __future__ import annotations

from .core import Codec, Output, ProxyConfig, ProxyCore
from .policy import Policy, ToolPolicy, load_policy

__all__ = ["Codec", "Output", "Policy", "ProxyConfig", "ProxyCore", "ToolPolicy", "load_policy"]
