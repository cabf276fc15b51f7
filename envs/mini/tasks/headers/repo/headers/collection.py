"""A mutable mapping of header names to values; names compare case-insensitively."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, MutableMapping


class Headers(MutableMapping[str, str]):
    def __init__(self, items: Mapping[str, str] | Iterable[tuple[str, str]] = ()):
        # normalized name -> (name as first spelled, value)
        self._store: dict[str, tuple[str, str]] = {}
        pairs = items.items() if isinstance(items, Mapping) else items
        for name, value in pairs:
            self[name] = value

    @staticmethod
    def _norm(name: str) -> str:
        return name.strip().lower()

    def __setitem__(self, name: str, value: str) -> None:
        key = self._norm(name)
        spelled = self._store[key][0] if key in self._store else name.strip()
        self._store[key] = (spelled, str(value).strip())

    def __getitem__(self, name: str) -> str:
        return self._store[self._norm(name)][1]

    def __delitem__(self, name: str) -> None:
        del self._store[self._norm(name)]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._store

    def __iter__(self) -> Iterator[str]:
        return (spelled for spelled, _ in self._store.values())

    def __len__(self) -> int:
        return len(self._store)

    def __repr__(self) -> str:
        return f"Headers({dict(self.items())!r})"

    def copy(self) -> "Headers":
        return Headers(self.items())

    def to_lines(self) -> list[str]:
        return [f"{name}: {value}" for name, value in self.items()]
