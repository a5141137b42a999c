"""Which training samples each rank sees, epoch after epoch.

Like DistributedSampler (a seeded permutation per epoch, strided over ranks)
but padded by wrapping to a whole number of global batches, so every step of
every rank has exactly ``batch_size`` samples and a trial trains exactly
``steps * batch_size * world_size`` samples whatever the dataset size.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
from torch.utils.data import Sampler


class ShardedEpochSampler(Sampler[int]):
    def __init__(self, dataset_len: int, batch_size: int, rank: int, world_size: int, seed: int):
        self.dataset_len = dataset_len
        self.rank = rank
        self.world_size = world_size
        self.seed = seed
        self.epoch = 0
        global_batch = batch_size * world_size
        self.steps_per_epoch = max(1, math.ceil(dataset_len / global_batch))
        self.padded_len = self.steps_per_epoch * global_batch

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.padded_len // self.world_size

    def __iter__(self) -> Iterator[int]:
        g = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        order = torch.randperm(self.dataset_len, generator=g)
        repeats = math.ceil(self.padded_len / self.dataset_len)
        order = order.repeat(repeats)[: self.padded_len]
        return iter(order[self.rank :: self.world_size].tolist())
