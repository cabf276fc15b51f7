"""Run many coroutines with a bound on how many run at once, with an optional progress bar."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Iterable


async def bounded_gather(aws: Iterable[Awaitable[Any]], workers: int, desc: str | None = None,
                         unit: str = "task") -> list[Any]:
    """`asyncio.gather` of `aws`, at most `workers` at a time; a tqdm bar when `desc` is given."""
    aws = list(aws)
    sem = asyncio.Semaphore(max(1, workers))
    bar = None
    if desc is not None:
        from tqdm import tqdm

        bar = tqdm(total=len(aws), desc=desc, unit=unit)

    async def one(aw: Awaitable[Any]) -> Any:
        try:
            async with sem:
                try:
                    return await aw
                finally:
                    if bar is not None:
                        bar.update(1)
        except asyncio.CancelledError:
            if asyncio.iscoroutine(aw):
                aw.close()  # cancelled while waiting its turn: never started, so no "never awaited" warning
            raise

    try:
        return await asyncio.gather(*(one(aw) for aw in aws))
    finally:
        if bar is not None:
            bar.close()
