"""An MCP server shaped like mcp-server-sqlite (PyPI), on the official SDK: its tools answer
``str(rows)``, the Python literal of ``[dict(row) for row in cursor.fetchall()]``, exactly as
that server's ``read_query`` does. (mcp-server-sqlite itself is written against the 1.x SDK's
low-level API, which the SDK this project tests with no longer has, so it cannot run here.)

A real SQLite database (in memory, seeded) answers the queries:

    python tests/sqlite_server.py
"""

from __future__ import annotations

import sqlite3

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("sqlite")
_db = sqlite3.connect(":memory:", check_same_thread=False)
_db.row_factory = sqlite3.Row
_db.executescript(
    """
    CREATE TABLE tracks (id INTEGER PRIMARY KEY, title TEXT, artist TEXT, bpm REAL,
                         genre TEXT, explicit INTEGER, note TEXT);
    """
)
_GENRES = ("house", "techno", "ambient")
_db.executemany(
    "INSERT INTO tracks (title, artist, bpm, genre, explicit, note) VALUES (?, ?, ?, ?, ?, ?)",
    [
        (
            f"Track {i}" if i % 7 else f'It\'s "track" {i}',
            "Dayna Blackwell" if i % 3 else "Ada Lovelace",
            None if i % 4 == 0 else 118.5 + i % 9,
            _GENRES[i % 3],
            i % 2,
            None if i % 5 else "remaster\tof the 1999 mix\n",
        )
        for i in range(1, 41)
    ],
)


def _rows(query: str) -> str:
    return str([dict(row) for row in _db.execute(query).fetchall()])


@mcp.tool(structured_output=False)
def read_query(query: str) -> str:
    """Execute a SELECT query on the SQLite database."""
    return _rows(query)


@mcp.tool(structured_output=False)
def list_tables() -> str:
    """List all tables in the SQLite database."""
    return _rows("SELECT name FROM sqlite_master WHERE type='table'")


@mcp.tool(structured_output=False)
def describe_table(table_name: str) -> str:
    """Get the schema information for a specific table."""
    return _rows(f"PRAGMA table_info({table_name})")


@mcp.tool(structured_output=False)
def read_tuples(query: str) -> str:
    """A query's rows as tuples (what a server without a row factory answers)."""
    return str(list(map(tuple, _db.execute(query).fetchall())))


if __name__ == "__main__":
    mcp.run()
