"""Name lookup shared by the hardware and model catalogues."""

from __future__ import annotations

from difflib import get_close_matches
from typing import TypeVar

T = TypeVar("T")


def index(entries: list[T]) -> dict[str, T]:
    """Map every lower-cased name and alias of ``entries`` to its entry."""
    return {key.lower(): entry for entry in entries for key in (entry.name, *entry.aliases)}


def lookup(name: object, table: dict[str, T], kind: str, example: str) -> T:
    """Return the entry called ``name`` (case-insensitive), or raise KeyError listing close names."""
    if not isinstance(name, str):
        raise TypeError(f"{kind} name must be a string such as {example!r}, got {name!r}")
    key = name.strip().lower()
    if key in table:
        return table[key]
    close = get_close_matches(key, table, n=4, cutoff=0.5)
    names = sorted({table[c].name for c in close})
    hint = f" Did you mean {', '.join(names)}?" if names else ""
    known = sorted({entry.name for entry in table.values()})
    raise KeyError(f"unknown {kind} {name!r}.{hint} The catalogue has: {', '.join(known)}")
