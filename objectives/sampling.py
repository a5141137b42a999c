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
        # (seed, epoch) in shared memory: loader workers, forked or spawned once (persistent_workers), read the
        # epoch the loop is in, for randomness per sample that no worker layout changes (sample_generator)
        self.stamp = torch.tensor([seed, 0], dtype=torch.int64).share_memory_()

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.stamp[1] = epoch

    def __len__(self) -> int:
        return self.padded_len // self.world_size

    def __iter__(self) -> Iterator[int]:
        g = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        order = torch.randperm(self.dataset_len, generator=g)
        repeats = math.ceil(self.padded_len / self.dataset_len)
        order = order.repeat(repeats)[: self.padded_len]
        return iter(order[self.rank :: self.world_size].tolist())


def sample_generator(stamp: torch.Tensor, index: int) -> torch.Generator:
    """A generator for sample ``index``'s random draws (augmentation) in the epoch ``stamp`` (a sampler's) holds.

    Drawn from the global stream instead, a sample's augmentation would depend on which process draws it: each
    DataLoader worker has its own stream, so ``loader.num_workers`` (a speed-only knob) would change what the model
    trains on (digits: val_accuracy 0.9749 with no workers, 0.9777 with two, the same seed). Seeded by (seed,
    epoch, index), the draws are the same with any number of workers, persistent or not, and on any rank."""
    seed, epoch = (int(v) for v in stamp.tolist())
    return torch.Generator().manual_seed(((seed * 1_000_003 + epoch) * 1_000_003 + index) % (2**63))
