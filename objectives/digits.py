"""The digits workload: sklearn's bundled 8x8 digits, upscaled, and a small CNN.

Real data that ships with scikit-learn (no download), small enough that a
trial of a few thousand samples learns to >90% validation accuracy in seconds
on a CPU, yet with real per-sample CPU work in ``__getitem__`` (random affine
plus elastic distortion, rendered straight from the 8x8 source at
``image_size_px``) so that the DataLoader worker knobs change throughput the
way they do on real image pipelines.
"""

from __future__ import annotations

import gzip
import importlib.util
import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

from objectives.config import DigitsConfig
from objectives.sampling import ShardedEpochSampler, sample_generator
from objectives.workload import Workload

NUM_CLASSES = 10
SPLIT_SEED = 20240229  # fixed so every trial of a sweep validates on the same images
ROTATION_DEG = 15.0
SHIFT_FRACTION = 0.1
SCALE_RANGE = 0.1
ELASTIC_ALPHA = 0.15  # displacement in grid units (-1..1 spans the image)
ELASTIC_SIGMA_PX = 3.0
NOISE_STD = 0.05
HEAD_GRID_PX = 4


def _gaussian_kernel(sigma_px: float) -> torch.Tensor:
    radius = int(math.ceil(3 * sigma_px))
    x = torch.arange(-radius, radius + 1, dtype=torch.float32)
    k = torch.exp(-0.5 * (x / sigma_px) ** 2)
    return k / k.sum()


def random_grids(n: int, size_px: int, kernel: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """``n`` sampling grids (n, S, S, 2): a random affine plus a Simard-style elastic distortion each.

    Batched, so the same code augments one sample in a loader worker (drawing from
    the sample's own ``generator``) or a whole batch on the device
    (``loader.augment_on_device``, from the device's stream).
    """
    device = kernel.device
    angle = math.radians(ROTATION_DEG) * (2 * torch.rand(n, device=device, generator=generator) - 1)
    scale = 1 + SCALE_RANGE * (2 * torch.rand(n, device=device, generator=generator) - 1)
    shift = (2 * torch.rand(n, 2, device=device, generator=generator) - 1) * 2 * SHIFT_FRACTION
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    theta = torch.stack([torch.stack([cos, -sin, shift[:, 0]], 1), torch.stack([sin, cos, shift[:, 1]], 1)], 1)
    grid = F.affine_grid(theta, [n, 1, size_px, size_px], align_corners=False)
    return grid + _elastic_displacement(n, size_px, kernel, generator)


def _elastic_displacement(n: int, size_px: int, kernel: torch.Tensor,
                          generator: torch.Generator | None = None) -> torch.Tensor:
    """A Gaussian-smoothed random displacement field per sample, scaled to ELASTIC_ALPHA at its largest."""
    field = 2 * torch.rand(n * 2, 1, size_px, size_px, device=kernel.device, generator=generator) - 1
    pad = len(kernel) // 2
    field = F.conv2d(F.pad(field, (pad, pad, 0, 0), mode="reflect"), kernel.view(1, 1, 1, -1))
    field = F.conv2d(F.pad(field, (0, 0, pad, pad), mode="reflect"), kernel.view(1, 1, -1, 1))
    field = field.view(n, 2, size_px, size_px)
    field = field / field.abs().amax(dim=(1, 2, 3), keepdim=True).clamp_min(1e-6)
    return ELASTIC_ALPHA * field.permute(0, 2, 3, 1)


def render(images_8px: torch.Tensor, size_px: int, kernel: torch.Tensor | None,
           generator: torch.Generator | None = None) -> torch.Tensor:
    """(N, 1, 8, 8) sources -> (N, 1, S, S) normalised images; augmented when a kernel is given, from
    ``generator`` when given (one sample's, in the loader) else the device's stream.

    One ``grid_sample`` does the upscaling and the augmentation together, so a
    sample costs the same whether or not the geometry is random.
    """
    n, device = len(images_8px), images_8px.device
    if kernel is None:
        theta = torch.eye(2, 3, device=device).expand(n, 2, 3)
        grid = F.affine_grid(theta, [n, 1, size_px, size_px], align_corners=False)
    else:
        grid = random_grids(n, size_px, kernel, generator)
    image = F.grid_sample(images_8px, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    if kernel is not None:
        image = image + NOISE_STD * torch.randn(image.shape, dtype=image.dtype, device=device, generator=generator)
    return (image - 0.5) / 0.5


def elastic_kernel(size_px: int) -> torch.Tensor:
    return _gaussian_kernel(ELASTIC_SIGMA_PX * size_px / 32)


class DigitsDataset(Dataset):
    """8x8 digits rendered at ``image_size_px``, optionally with random augmentation.

    With ``rendered=False`` items are the 8x8 sources themselves, for
    ``loader.augment_on_device``: the batch is rendered and augmented on the
    device by ``render`` instead of per sample in the loader.

    ``follow(sampler)`` draws each sample's augmentation from its own
    generator, seeded by the sampler's seed and epoch and the sample's index
    (objectives/sampling.py ``sample_generator``): the same images whatever
    ``loader.num_workers``. Not followed, it draws from the process's stream.
    """

    def __init__(
        self, images_8px: torch.Tensor, labels: torch.Tensor, image_size_px: int, augment: bool, rendered: bool = True
    ):
        self.images_8px = images_8px  # (N, 1, 8, 8) in [0, 1]
        self.labels = labels
        self.size_px = image_size_px
        self.rendered = rendered
        self._kernel = elastic_kernel(image_size_px) if augment else None
        self._stamp: torch.Tensor | None = None  # the followed sampler's (seed, epoch)

    def follow(self, sampler: ShardedEpochSampler) -> None:
        self._stamp = sampler.stamp

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        source = self.images_8px[index : index + 1]
        if not self.rendered:
            return source[0], self.labels[index]
        generator = sample_generator(self._stamp, index) if self._stamp is not None and self._kernel is not None \
            else None
        return render(source, self.size_px, self._kernel, generator)[0], self.labels[index]


def load_digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """sklearn's digits as (images 1797x8x8 in 0..16, labels), read from the file scikit-learn ships,
    without importing scikit-learn (two seconds of every sweep's start, before its first trial);
    sklearn.datasets.load_digits, which reads the same file, where the file is not found there."""
    spec = importlib.util.find_spec("sklearn")
    csv = Path(spec.origin).parent / "datasets" / "data" / "digits.csv.gz" if spec and spec.origin else None
    if csv is None or not csv.is_file():
        from sklearn.datasets import load_digits

        digits = load_digits()
        return digits.images, digits.target
    with gzip.open(csv, "rt") as f:
        data = np.loadtxt(f, delimiter=",")
    return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(np.int64)


def build_datasets(cfg: DigitsConfig) -> tuple[DigitsDataset, DigitsDataset]:
    """Train and validation sets from a fixed permutation, so the split never depends on the trial."""
    digits_images, digits_labels = load_digits_arrays()
    images = torch.from_numpy(digits_images.astype(np.float32) / 16.0).unsqueeze(1)
    labels = torch.from_numpy(digits_labels.astype(np.int64))
    order = torch.from_numpy(np.random.default_rng(SPLIT_SEED).permutation(len(labels)))
    n_val = max(1, int(round(len(labels) * cfg.val_fraction)))
    val_idx, train_idx = order[:n_val], order[n_val:]
    train = DigitsDataset(images[train_idx], labels[train_idx], cfg.image_size_px, cfg.augment)
    val = DigitsDataset(images[val_idx], labels[val_idx], cfg.image_size_px, augment=False)
    return train, val


class DigitsCNN(nn.Module):
    """conv-norm-relu-pool blocks with widths from ``objective.channels``, a 4x4 pool, linear head.

    The head sees a 4x4 map rather than a global average because where the
    strokes are is what tells a 3 from an 8.

    The norm is GroupNorm(1, C) rather than BatchNorm: gloo DDP on CPU cannot
    synchronise BatchNorm statistics (torch's SyncBatchNorm is GPU-only), and
    a per-sample norm keeps k ranks at batch B exactly equivalent to one rank
    at batch k*B, so the devices knob changes speed and not the maths.
    """

    def __init__(self, channels: list[int]):
        super().__init__()
        stages: list[nn.Module] = []
        in_ch = 1
        for out_ch in channels:
            stages.append(nn.Sequential(
                nn.Conv2d(in_ch, out_ch, kernel_size=3, padding=1, bias=False),
                nn.GroupNorm(1, out_ch),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(2),
            ))
            in_ch = out_ch
        self.features = nn.Sequential(*stages)  # one block per stage, for activation checkpointing
        self.head = nn.Linear(in_ch * HEAD_GRID_PX**2, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, HEAD_GRID_PX), 1))


def build_model(cfg: DigitsConfig) -> DigitsCNN:
    return DigitsCNN(cfg.channels)


def example_input(cfg: DigitsConfig) -> torch.Tensor:
    """One sample, for FLOP counting and the model-pruning dependency graph."""
    return torch.zeros(1, 1, cfg.image_size_px, cfg.image_size_px)


def digits_workload(cfg: DigitsConfig) -> Workload:
    train, val = build_datasets(cfg)
    model = build_model(cfg)
    kernel = elastic_kernel(cfg.image_size_px) if cfg.augment else None
    sources = DigitsDataset(train.images_8px, train.labels, cfg.image_size_px, cfg.augment, rendered=False)
    return Workload(
        train,
        val,
        model,
        example_input(cfg),
        model_pruning_ignored=[model.head],
        checkpoint_blocks=list(model.features),
        device_augment_train_set=sources if cfg.augment else None,
        device_augment=(lambda x: render(x, cfg.image_size_px, kernel.to(x.device))) if cfg.augment else None,
    )
