"""loader.pin_memory: on by default when the trial trains on CUDA (the loop's
non_blocking copies are only asynchronous from pinned memory), never on a
CPU. This machine has no GPU: the CUDA side is the decision, not a copy."""
from __future__ import annotations

import warnings

import torch
from torch.utils.data import SequentialSampler, TensorDataset

from objectives.config import LoaderConfig, parse_config
from objectives.knobs.loader import apply_loader, pin_memory
from search.paths import conf_dir


def test_pin_memory_defaults_to_on_for_cuda_and_off_on_a_cpu() -> None:
    assert parse_config({}).loader.pin_memory is None
    assert "pin_memory: null" in (conf_dir() / "config.yaml").read_text()
    assert pin_memory(LoaderConfig(), "cuda") is True
    assert pin_memory(LoaderConfig(), "cpu") is False
    assert pin_memory(LoaderConfig(pin_memory=False), "cuda") is False  # the knob still turns it off
    assert pin_memory(LoaderConfig(pin_memory=True), "cpu") is False  # a no-op DataLoader would warn about


def test_a_cpu_trials_loader_is_unpinned_without_a_warning() -> None:
    data = TensorDataset(torch.randn(8, 3), torch.zeros(8, dtype=torch.long))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loader = apply_loader(LoaderConfig(pin_memory=True), data, 4, SequentialSampler(data))
        assert [x.shape[0] for x, _ in loader] == [4, 4]
    assert loader.pin_memory is torch.cuda.is_available()
