"""Data loading ahead of the step for examples/slurm/train.py, beside it: the next micro-batch is read (memory-mapped
shards, the window's numpy concatenation, a pinned host copy on CUDA) on a background thread while the current one
trains, so the accelerator never waits on the file system between micro-steps (before: every batch was read
synchronously in the training loop)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import torch

DEPTH = 2  # micro-batches read ahead


class Prefetcher:
    """`get(key, ahead)`: the batch for `key` (read now if it was not read ahead), and reading of the keys in
    `ahead` started. Batches are functions of their key (recipe.batch_for), so reading ahead changes nothing else."""

    def __init__(self, read: Callable[..., torch.Tensor], *, pin: bool) -> None:
        self.read, self.pin = read, pin
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefetch")
        self.pending: dict[tuple, Future] = {}

    def _load(self, key: tuple):
        """The batch (a tensor, or a tuple of tensors and None: tokens and their loss mask), pinned on CUDA."""
        batch = self.read(*key)
        if isinstance(batch, tuple):
            return tuple(b.pin_memory() if self.pin and b is not None else b for b in batch)
        return batch.pin_memory() if self.pin else batch

    def get(self, key: tuple, ahead: list[tuple]):
        future = self.pending.pop(key, None) or self.pool.submit(self._load, key)
        for k in ahead[:DEPTH]:
            if k not in self.pending:
                self.pending[k] = self.pool.submit(self._load, k)
        return future.result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
