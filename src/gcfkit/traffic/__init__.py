"""Recorded MCP traffic: the corpus format, capturing it, replaying it through the proxy."""
