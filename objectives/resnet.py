"""The resnet workload: a small ResNet on synthetic ImageNet-shaped batches, for throughput only.

Images are 3 x ``image_size_px`` x ``image_size_px`` random tensors (64 px by
default so a CPU finishes a trial; 224 is ImageNet's size, for a GPU), each
generated from its own index with a seeded generator, so the data is the same
in every trial and every DataLoader worker, costs a little CPU per sample
like a real decode would, and needs no memory for a stored dataset. Labels
are ``index % num_classes``. Random images carry nothing to learn, so this
workload reports no ``val_accuracy`` and no ``val_loss``
(``objective.measures_accuracy: false``) and the sweep optimises speed alone.

The network is ResNet-style: a 3x3 stem, then one stage per entry of
``objective.widths`` with ``blocks_per_stage`` basic blocks (two 3x3 convs,
BatchNorm, identity or 1x1 projection shortcut), stride 2 between stages,
global average pool and a linear head. Structured model pruning removes
channels everywhere but the head (torch-pruning keeps residual additions
consistent).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import Dataset

from objectives.config import ResnetConfig
from objectives.workload import Workload

DATA_SEED = 1_000_003


class SyntheticImages(Dataset):
    def __init__(self, size: int, image_size_px: int, num_classes: int):
        self.size, self.image_size_px, self.num_classes = size, image_size_px, num_classes

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(DATA_SEED + index)
        image = torch.randn(3, self.image_size_px, self.image_size_px, generator=g)
        return image, torch.tensor(index % self.num_classes)


class BasicBlock(nn.Module):
    def __init__(self, in_ch: int, out_ch: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, widths: list[int], blocks_per_stage: int, num_classes: int):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, widths[0], 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU(inplace=True)
        )
        blocks: list[nn.Module] = []
        in_ch = widths[0]
        for stage, width in enumerate(widths):
            for i in range(blocks_per_stage):
                blocks.append(BasicBlock(in_ch, width, stride=2 if stage > 0 and i == 0 else 1))
                in_ch = width
        self.stages = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(in_ch, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.pool(self.stages(self.stem(x))), 1))


def resnet_workload(cfg: ResnetConfig) -> Workload:
    model = ResNet(cfg.widths, cfg.blocks_per_stage, cfg.num_classes)
    return Workload(
        train_set=SyntheticImages(cfg.dataset_size, cfg.image_size_px, cfg.num_classes),
        val_set=None,
        model=model,
        example_input=torch.zeros(1, 3, cfg.image_size_px, cfg.image_size_px),
        model_pruning_ignored=[model.head],
        checkpoint_blocks=list(model.stages),
    )
