"""Name -> object registries, so configs pick implementations by string.

A registry replaces if/elif chains keyed on config strings: a module registers its
implementations with a decorator, and a config value such as ``algorithm.adv: grpo``
is looked up with :meth:`Registry.get`. Unknown names fail with the list of known
names and the nearest match, so a typo in a config is a one-line fix.

Importing this module imports nothing heavy (no torch, no Ray).

>>> colors = Registry("color")
>>> @colors.register("red")
... def red() -> str:
...     return "#f00"
>>> colors.get("red")()
'#f00'
>>> colors.names()
['red']
>>> colors.get("rd")
Traceback (most recent call last):
...
rlinf_contracts.registry.UnknownNameError: unknown color 'rd'; did you mean 'red'? Known: red
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


def did_you_mean(name: object, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``known`` to a misspelt ``name``, else ``""``:
    the one wording every "unknown name" error of the project ends with.

    >>> did_you_mean("scriptd", ["keyboard", "scripted"]), did_you_mean("zz", ["keyboard"])
    ("; did you mean 'scripted'?", '')
    """
    close = difflib.get_close_matches(str(name), list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


class UnknownNameError(KeyError):
    """Raised by :meth:`Registry.get` for a name that was never registered."""

    def __str__(self) -> str:  # KeyError would print the message inside quotes
        return str(self.args[0]) if self.args else ""


class Registry(Generic[T]):
    """A string-keyed table of implementations of one kind (``"advantage"``, ``"env"``...)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator registering the decorated object under ``name``; returns it unchanged."""

        def decorator(obj: T) -> T:
            self.add(name, obj)
            return obj

        return decorator

    def add(self, name: str, obj: T) -> None:
        """Register ``obj`` under ``name``; a second object under the same name is an error."""
        if not name or not isinstance(name, str):
            raise ValueError(f"{self.kind} name must be a non-empty string, got {name!r}")
        if name in self._items and self._items[name] is not obj:
            raise ValueError(
                f"{self.kind} {name!r} is already registered to {self._items[name]!r}; "
                "pick another name"
            )
        self._items[name] = obj

    def get(self, name: str) -> T:
        """Return the object registered under ``name``; unknown names raise with suggestions."""
        try:
            return self._items[name]
        except KeyError:
            pass
        known = self.names()
        raise UnknownNameError(
            f"unknown {self.kind} {name!r}{did_you_mean(name, known)} "
            f"Known: {', '.join(known) or '(none)'}"
        )

    def names(self) -> list[str]:
        """Sorted registered names."""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, names={self.names()})"
