"""gcfkit: GCF (Graph Compact Format) for agents."""

from .errors import GCFError

__all__ = ["GCFError"]
__version__ = "0.1.0"
