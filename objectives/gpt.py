"""The gpt workload: a decoder-only transformer trained on the bytes of Python's stdlib.

Tokens are raw bytes (ids 0-255, no tokenizer to ship); pre-LN blocks,
learned positional embeddings, output head tied to the token embedding, and
attention through ``F.scaled_dot_product_attention(is_causal=True)`` so a
GPU runs flash attention. ``objective.size`` picks ``tiny`` (2 layers, 2
heads, d_model 64, seq_len 64, vocabulary 256: trains in seconds on a CPU)
or ``gpt2-small``, GPT-2 small itself for a GPU: 12 layers, 12 heads,
d_model 768, seq_len 1024 and GPT-2's vocabulary of 50257, so 124,439,808
parameters, the same weight and head matmuls and the same logits memory as
the model users train. The byte data uses only ids 0-255; the other 50001
embedding rows (38.4M parameters) stay in because the tied head's matmul
over the full vocabulary and its (batch, 1024, 50257) logits are a large
part of GPT-2 small's time and memory, which a systems sweep must measure.
With a 256-entry vocabulary the same blocks would be 86.0M parameters.

A sample is a window of ``seq_len + 1`` bytes (input and next-byte target);
the training set holds every start offset of the train split and the
sampler's permutation makes the windows random. Validation is
``val_batches * train.eval_batch_size`` windows at evenly spaced, fixed
starts over the validation split, so every trial scores the same bytes.
``val_accuracy`` is next-byte accuracy over all positions.

Model FLOPs per token (``model_flops_per_token``) follow the PaLM paper's
appendix B: ``6 * N + 12 * n_layer * d_model * seq_len``, where N is the
parameter count of the matmuls: every parameter but the position embedding,
because the token embedding's weight is also the tied head's (nanoGPT counts
the same way; at vocabulary 50257 the head is a third of the weight
FLOPs), 6N the forward+backward weight matmuls, and the second
term the attention score and value matmuls (QK^T and AV: 2 matmuls x 2
FLOPs x 3 for forward+backward, per layer, per position attended, with
n_head * head_dim = d_model), counted for the full seq_len as PaLM does,
without halving for the causal mask.

Model pruning ``structured`` removes MLP hidden channels only (the first
MLP Linear's outputs and the second's inputs, via torch-pruning); attention
heads and the residual width are left whole, because cutting heads out of
a fused qkv projection is fiddly and narrowing the residual width touches
every layer and the tied embedding.
Model pruning ``2:4`` swaps the four Linear layers of every block but the
first and the last (at gpt2-small, 40 of 48); those two blocks stay dense,
as do the embeddings and the head (the tied embedding, not a Linear module),
because the first and last layers lose the most accuracy to sparsity.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

from objectives.config import GptConfig
from objectives.corpus import build_corpus
from objectives.config_check import ConfigError
from objectives.workload import Workload

BYTE_VOCAB = 256  # the ids the data uses
INIT_STD = 0.02
SIZES = {  # n_layer, n_head, d_model, default seq_len, vocabulary
    "tiny": (2, 2, 64, 64, BYTE_VOCAB),
    "gpt2-small": (12, 12, 768, 1024, 50257),  # GPT-2 small: 124,439,808 parameters
}


class ByteWindows(Dataset):
    """Windows of ``seq_len + 1`` bytes from a uint8 array: (input bytes, next bytes), int64."""

    def __init__(self, data: np.ndarray, seq_len: int, starts: np.ndarray | None = None):
        self.data = data
        self.seq_len = seq_len
        self.starts = starts

    def __len__(self) -> int:
        return len(self.starts) if self.starts is not None else len(self.data) - self.seq_len

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = int(self.starts[index]) if self.starts is not None else index
        chunk = torch.from_numpy(self.data[start : start + self.seq_len + 1].astype(np.int64))
        return chunk[:-1], chunk[1:]


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in self.qkv(x).split(c, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class MLP(nn.Module):
    def __init__(self, d_model: int):
        super().__init__()
        self.fc_in = nn.Linear(d_model, 4 * d_model)
        self.fc_out = nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc_out(F.gelu(self.fc_in(x)))


class Block(nn.Module):
    def __init__(self, d_model: int, n_head: int):
        super().__init__()
        self.ln_attn = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head)
        self.ln_mlp = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_attn(x))
        return x + self.mlp(self.ln_mlp(x))


class GPT(nn.Module):
    """Logits (B, T, vocab) for byte ids (B, T); the head reuses the token embedding's weight."""

    def __init__(self, n_layer: int, n_head: int, d_model: int, seq_len: int, vocab: int = BYTE_VOCAB):
        super().__init__()
        self.n_layer, self.d_model, self.seq_len = n_layer, d_model, seq_len
        self.token_embedding = nn.Embedding(vocab, d_model)
        self.position_embedding = nn.Embedding(seq_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head) for _ in range(n_layer))
        self.ln_final = nn.LayerNorm(d_model)
        for name, p in self.named_parameters():
            if name.endswith("weight") and p.dim() == 2:
                # GPT-2: residual projections scaled down by depth so the stream's variance stays put
                std = INIT_STD / (2 * n_layer) ** 0.5 if name.endswith(("proj.weight", "fc_out.weight")) else INIT_STD
                nn.init.normal_(p, mean=0.0, std=std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.token_embedding(idx) + self.position_embedding(positions)
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_final(x), self.token_embedding.weight)


def matmul_params(model: GPT) -> int:
    """Parameters that take part in a matmul: all but the position embedding (the token embedding is the head)."""
    return sum(p.numel() for p in model.parameters()) - model.position_embedding.weight.numel()


def model_flops_per_token(model: GPT) -> float:
    """Training FLOPs per token, PaLM appendix B: 6N + 12 * n_layer * d_model * seq_len."""
    return 6.0 * matmul_params(model) + 12.0 * model.n_layer * model.d_model * model.seq_len


def seq_len_of(cfg: GptConfig) -> int:
    return cfg.seq_len if cfg.seq_len is not None else SIZES[cfg.size][3]


def build_model(cfg: GptConfig) -> GPT:
    n_layer, n_head, d_model, _, vocab = SIZES[cfg.size]
    return GPT(n_layer, n_head, d_model, seq_len_of(cfg), vocab)


def gpt_workload(cfg: GptConfig, eval_batch_size: int) -> Workload:
    seq_len = seq_len_of(cfg)
    corpus = build_corpus(cfg.corpus_max_bytes, cfg.val_fraction)
    if min(len(corpus.train), len(corpus.val)) <= seq_len + 1:
        raise ConfigError(
            f"objective.corpus_max_bytes must leave both splits longer than seq_len + 1 = {seq_len + 1} bytes; "
            f"got {cfg.corpus_max_bytes} (train {len(corpus.train)}, val {len(corpus.val)} bytes); "
            f"fix: objective.corpus_max_bytes=2000000"
        )
    val_windows = cfg.val_batches * eval_batch_size
    starts = np.linspace(0, len(corpus.val) - seq_len - 1, val_windows).round().astype(np.int64)
    model = build_model(cfg)
    mlp_inputs = {block.mlp.fc_in for block in model.blocks}
    return Workload(
        train_set=ByteWindows(corpus.train, seq_len),
        val_set=ByteWindows(corpus.val, seq_len, starts),
        model=model,
        example_input=torch.zeros(1, seq_len, dtype=torch.long),
        model_pruning_ignored=[
            m for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding, nn.LayerNorm)) and m not in mlp_inputs
        ],
        semi_sparse_kept=[m for block in (model.blocks[0], model.blocks[-1]) for m in block.modules()
                          if isinstance(m, nn.Linear)],
        tokens_per_sample=seq_len,
        model_flops_per_token=model_flops_per_token,
        checkpoint_blocks=list(model.blocks),
    )
