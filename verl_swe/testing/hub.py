"""The Hugging Face hub where there is no network: `datasets.load_dataset(name, split=...)` answers with real
`datasets.Dataset`s built from the rows given, so the loader's hub path runs on what the hub would return."""

from __future__ import annotations

from contextlib import contextmanager
from unittest import mock


@contextmanager
def local_hub(splits: dict[str, dict[str, list[dict]]]):
    """`splits`: {"owner/name": {"split": rows}}; any other name or split is not found, as on the hub."""
    import datasets

    def load_dataset(name: str, split: str | None = None, **_):
        if split not in splits.get(name, {}):
            raise datasets.exceptions.DatasetNotFoundError(f"Dataset '{name}' (split {split}) doesn't exist")
        return datasets.Dataset.from_list(splits[name][split])

    with mock.patch.object(datasets, "load_dataset", load_dataset):
        yield
