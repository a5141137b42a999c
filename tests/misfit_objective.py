"""Models and datasets a user got wrong, for the custom objective's preflight tests: test support, not a product
objective. Each is what a user's first sweep brought (objective.model / train_dataset / val_dataset specs)."""

import torch
from torch import nn
from torch.utils.data import Dataset, IterableDataset


class Blobs(Dataset):
    """Four Gaussian blobs in 16 dimensions; ``target``: classes (int), onehot (float rows), value (float)."""

    def __init__(self, size: int = 256, seed: int = 0, target: str = "classes"):
        g = torch.Generator().manual_seed(seed)
        centers = torch.randn(4, 16, generator=torch.Generator().manual_seed(0)) * 3
        self.y = torch.arange(size) % 4
        self.x = centers[self.y] + torch.randn(size, 16, generator=g)
        self.target = target

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        y = self.y[i]
        if self.target == "onehot":
            y = nn.functional.one_hot(y, 4).float()
        elif self.target == "value":
            y = y.float().unsqueeze(0)
        return self.x[i], y


class DictBlobs(Blobs):
    def __getitem__(self, i):
        return {"x": self.x[i], "label": self.y[i]}


class StreamBlobs(IterableDataset):
    def __iter__(self):
        yield from Blobs()


class Net(nn.Module):
    def __init__(self, hidden: int = 32, outputs: int = 4):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, outputs)

    def forward(self, x):
        return self.head(self.body(x))


class HeadFirst(nn.Module):
    """The classifier registered before the body: the last nn.Linear is not the head."""

    def __init__(self, hidden: int = 32):
        super().__init__()
        self.classifier = nn.Linear(hidden, 4)
        self.body = nn.Sequential(nn.Linear(16, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())

    def forward(self, x):
        return self.classifier(self.body(x))


class Picky(Net):
    """Takes only batches of a multiple of 8 samples (a reshape into groups, say)."""

    def forward(self, x):
        if x.shape[0] % 8:
            raise ValueError(f"batch {x.shape[0]} must be a multiple of 8")
        return super().forward(x)


class NotAModule:
    pass
