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


# -- 2:4 model pruning ------------------------------------------------------------------------


def gpt2_small_on_meta(monkeypatch, tmp_path):
    from objectives.gpt import gpt_workload

    monkeypatch.setenv("SEARCH_CACHE_DIR", str(tmp_path / "cache"))
    with torch.device("meta"):
        return gpt_workload(GptConfig(size="gpt2-small"), eval_batch_size=8)


def test_two_four_swaps_every_block_but_the_first_and_last_of_gpt2_small(monkeypatch, tmp_path):
    from objectives.config import ModelPruningConfig
    from objectives.knobs.model_pruning import layers_kept, semi_sparse_layer_names

    work = gpt2_small_on_meta(monkeypatch, tmp_path)
    names = semi_sparse_layer_names(work.model, layers_kept(ModelPruningConfig(0.5, "2:4"), work))
    assert names == [f"blocks.{block}.{layer}" for block in range(1, 11)
                     for layer in ("attn.qkv", "attn.proj", "mlp.fc_in", "mlp.fc_out")]


def test_two_four_has_nothing_to_swap_in_digits_and_says_so():
    from objectives.config import DigitsConfig, ModelPruningConfig
    from objectives.digits import digits_workload
    from objectives.knobs.model_pruning import layers_kept, model_pruning_skip_reason, semi_sparse_layer_names

    work, cfg = digits_workload(DigitsConfig()), ModelPruningConfig(0.5, "2:4")
    assert semi_sparse_layer_names(work.model, layers_kept(cfg, work)) == []  # convolutions and the head only
    assert "no Linear layer with both dimensions a multiple of 128" in model_pruning_skip_reason(
        cfg, work.model, layers_kept(cfg, work))


def mlp_workload():
    """Linear layers of widths a multiple of 128 or only of 64, between a first layer and a head."""
    from torch import nn

    from objectives.workload import Workload

    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 384), nn.ReLU(), nn.Linear(384, 192),
                          nn.ReLU(), nn.Linear(192, 256), nn.ReLU(), nn.Linear(256, 256), nn.Linear(256, 10))
    return Workload(train_set=None, val_set=None, model=model, example_input=torch.zeros(1, 256))


def test_two_four_needs_multiples_of_128_and_keeps_the_first_and_last_layers_by_default():
    from objectives.config import ModelPruningConfig
    from objectives.knobs.model_pruning import layers_kept, semi_sparse_layer_names

    work = mlp_workload()
    # 0 is the first layer and 9 the head; 4 and 6 have a dimension of 192 (a multiple of 64, not of 128)
    assert semi_sparse_layer_names(work.model, layers_kept(ModelPruningConfig(0.5, "2:4"), work)) == ["2", "8"]


def test_two_four_counts_flops_on_the_dense_model_before_the_swap():
    from objectives.config import ModelPruningConfig
    from objectives.knobs.model_pruning import prune_and_count
    from objectives.knobs.semi_sparse import AutocastSemiSparseLinear

    pruned = prune_and_count(ModelPruningConfig(0.5, "2:4"), mlp_workload(), applies=True)
    assert pruned.semi_sparse_layers == ["2", "8"]
    assert [type(pruned.model[i]) for i in (0, 2, 8, 9)] == [torch.nn.Linear, AutocastSemiSparseLinear,
                                                             AutocastSemiSparseLinear, torch.nn.Linear]
    m = pruned.metrics
    assert m["flops_per_sample"] == m["flops_per_sample_before_model_pruning"] > 0
    assert m["params_count"] == m["params_count_before_model_pruning"]
    assert m["model_pruning_semi_structured_layers"] == 2
    with pytest.raises(RuntimeError, match="Only CUDA tensors"):  # the packing is CUDA only: why it must count first
        with torch.autocast("cpu", dtype=torch.bfloat16):
            pruned.model(torch.zeros(1, 256))


def test_two_four_sparsifies_the_autocast_dtype_weight_and_the_gradient_reaches_the_fp32_master():
    from objectives.knobs.semi_sparse import AutocastSemiSparseLinear, weight_in_compute_dtype

    layer = AutocastSemiSparseLinear(256, 128)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        weight = weight_in_compute_dtype(layer.weight, "cpu")
    assert weight.dtype == torch.bfloat16  # the tile kernel takes fp16/bf16 only; the master weight is fp32
    (weight.float() * 3).sum().backward()
    assert layer.weight.dtype == layer.weight.grad.dtype == torch.float32
    assert torch.equal(layer.weight.grad, torch.full_like(layer.weight, 3.0))
    assert weight_in_compute_dtype(layer.weight, "cpu").dtype == torch.float32  # no autocast: as it is
    with pytest.raises(RuntimeError, match="2:4 sparse kernels take fp16 or bf16 weights; got torch.float32"):
        layer(torch.zeros(2, 256))  # without autocast the kernel would refuse the fp32 weight


def two_four_reference(layer, x):
    """What the 2:4 layer must compute: a dense linear on the bf16 weight with NVIDIA's 2:4 mask."""
    from objectives.knobs.semi_sparse import two_four_mask

    weight = layer.weight.detach().bfloat16()
    pruned = weight * two_four_mask(weight)
    return pruned, torch.nn.functional.linear(x.detach().bfloat16(), pruned, layer.bias.detach().bfloat16())


def check_two_four_layer(device: str) -> None:
    """Forward on (batch, seq, features) under bf16 autocast against the dense reference; straight-through
    gradients: d(sum y)/dW[o, i] = the sum of x[:, i] for every o, pruned or not; d(sum y)/dx = pruned's column sums."""
    from objectives.knobs.semi_sparse import AutocastSemiSparseLinear

    torch.manual_seed(0)
    layer = AutocastSemiSparseLinear(256, 384).to(device)
    x = torch.randn(4, 8, 256, device=device, requires_grad=True)
    with torch.autocast(device, dtype=torch.bfloat16):
        y = layer(x)
    pruned, ref = two_four_reference(layer, x)
    assert y.shape == (4, 8, 384) and y.dtype == torch.bfloat16
    assert (y.float() - ref.float()).norm() / ref.float().norm() < 1e-2
    y.float().sum().backward()
    assert layer.weight.grad.dtype == torch.float32 and x.grad.dtype == torch.float32
    column_sums = x.detach().reshape(-1, 256).sum(0)
    assert torch.allclose(layer.weight.grad, column_sums.expand(384, 256), rtol=2e-2, atol=0.5)
    assert torch.allclose(x.grad[0, 0], pruned.float().sum(0), rtol=2e-2, atol=0.1)
    assert torch.allclose(layer.bias.grad, torch.full((384,), 32.0, device=device))


def test_two_four_mask_keeps_the_two_largest_magnitudes_of_every_four_in_a_row():
    from objectives.knobs.semi_sparse import two_four_mask

    weight = torch.tensor([[0.1, -0.9, 0.3, 0.2, 1.0, 2.0, -3.0, 0.0]])
    assert two_four_mask(weight).tolist() == [[False, True, True, False, False, True, True, False]]
    mask = two_four_mask(torch.randn(64, 128))
    assert (mask.reshape(64, 32, 4).sum(-1) == 2).all()


@pytest.fixture
def dense_packing(monkeypatch):
    """The CPU has no 2:4 packing (to_sparse_semi_structured takes CUDA tensors): the dense pruned weight
    stands in for it, so that everything around the sparse matmul runs here."""
    from objectives.knobs import semi_sparse

    monkeypatch.setattr(semi_sparse, "_CHECKED", set())
    monkeypatch.setattr(semi_sparse, "to_sparse_semi_structured", lambda pruned: pruned)
    return monkeypatch


def test_two_four_layer_computes_the_pruned_linear_and_straight_through_gradients_on_the_cpu(dense_packing):
    check_two_four_layer("cpu")


def test_a_sparse_matmul_that_misplaces_weights_fails_the_first_forward(dense_packing):
    """torch 2.11's tile-kernel path multiplied an H200's inputs by misplaced weights without an error."""
    from objectives.knobs import semi_sparse

    dense_packing.setattr(semi_sparse, "to_sparse_semi_structured", lambda pruned: pruned.roll(1, dims=1))
    layer = semi_sparse.AutocastSemiSparseLinear(256, 128)
    with pytest.raises(RuntimeError, match="does not multiply by the pruned weight .*fix: model_pruning.method=structured"):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            layer(torch.randn(2, 256))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_two_four_trains_on_a_gpu_with_batched_sequence_inputs():
    """The kernels themselves (cuSPARSELt through to_sparse_semi_structured), and the one-time check."""
    from objectives.knobs.semi_sparse import check_sparse_matmul

    check_sparse_matmul(torch.device("cuda"), torch.bfloat16)
    check_two_four_layer("cuda")


# -- fp8 ----------------------------------------------------------------------------------------


def test_fp8_converts_the_linear_layers_whose_dimensions_are_multiples_of_16_and_names_them():
    from objectives.knobs.precision import convert_to_fp8

    work = mlp_workload()
    work.model[-1] = torch.nn.Linear(256, 10)  # 10 outputs: not a multiple of 16
    names = convert_to_fp8(work.model, emulate=True)  # emulate: the fp8 casts in plain torch, on this CPU
    assert names == ["0", "2", "4", "6", "8"]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        work.model(torch.randn(4, 256)).float().sum().backward()  # the converted layers train
    assert work.model[0].weight.grad is not None and work.model[0].weight.dtype == torch.float32
    assert work.model[0].config.pad_inner_dim  # a batch's token count need not be a multiple of 16 (H200, 2026-11-27)


def test_fp8_converts_every_block_linear_of_gpt2_small():
    from objectives.knobs.precision import convert_to_fp8

    with torch.device("meta"):
        model = build_model(GptConfig(size="gpt2-small"))
    names = convert_to_fp8(model, emulate=True)
    assert len(names) == 48 and names[:4] == ["blocks.0.attn.qkv", "blocks.0.attn.proj", "blocks.0.mlp.fc_in",
                                              "blocks.0.mlp.fc_out"]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9),
                    reason="needs a CUDA GPU with fp8 tensor cores (sm_89+)")
def test_fp8_trains_on_a_gpu_when_the_token_count_is_not_a_multiple_of_16():
    """fp8's matmul (torch._scaled_mm) wants its inner dimension a multiple of 16. The layer filter sees only the
    weights; the backward's weight-gradient matmul runs over the tokens of a batch, which a model of the user's
    own (or batch 3 of 63-token windows) sets: the layers must train whatever that count is, compiled as
    trials run fp8."""
    pytest.importorskip("torchao")
    from objectives.knobs.precision import convert_to_fp8

    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64)).cuda()
    assert convert_to_fp8(model) == ["0", "2"]
    compiled = torch.compile(model)
    x = torch.randn(3, 63, 64, device="cuda")  # 189 tokens
    with torch.autocast("cuda", dtype=torch.bfloat16):
        compiled(x).float().square().mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


# -- combination rules --------------------------------------------------------------------------


TWO_FOUR = {"method": "2:4", "ratio": 0.5}


@pytest.mark.parametrize("cfg, says", [
    ({"precision": "fp8"}, "parallel.compile must not be none with precision=fp8"),
    ({"model_pruning": TWO_FOUR}, "precision must be bf16 or fp16 with model_pruning.method=2:4"),
    ({"model_pruning": TWO_FOUR, "precision": "tf32"}, "got precision=tf32; fix: precision=bf16"),
])
def test_combination_rules_refuse_before_any_hardware_check(cfg, says):
    from objectives import CombinationError, parse_config

    with pytest.raises(CombinationError) as err:
        parse_config(cfg)
    assert says in str(err.value) and "\n" not in str(err.value) and "fix: " in str(err.value)


def test_combinations_the_rules_allow_parse():
    from objectives import parse_config

    parse_config({"precision": "fp8", "parallel": {"compile": "default"}})
    parse_config({"model_pruning": {"method": "2:4", "ratio": 0.5}, "precision": "fp16"})
    parse_config({"model_pruning": {"method": "2:4", "ratio": 0.0}})  # 2:4 at ratio 0 is no model pruning


def compose_and_parse(fixed):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from objectives.config import parse_values
    from search.paths import conf_dir

    def parse(extra):
        with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
            cfg = compose("config", overrides=fixed + extra)
        return parse_values(OmegaConf.to_container(cfg, resolve=True))
    return parse


def plan(*arguments):
    """The space fitted to the rules on a GPU that runs every value, so only the combination rules act."""
    from objectives import Hardware
    from search.sweep.combinations import fit_to_rules, parse_probes
    from search.sweep.space import build_space

    hopper = Hardware(cpu_cores=8, gpu_count=1, compute_capability=(9, 0), cusparselt=True, torchao=True)
    space = build_space({}, list(arguments))
    parsed = parse_probes(space, compose_and_parse(space.fixed_overrides))
    space, notes = fit_to_rules(space, parsed[0], hopper)
    return {k: list(d.choices) for k, d in space.distributions.items()}, notes


def test_a_swept_value_that_breaks_a_rule_with_a_fixed_value_leaves_the_space():
    choices, notes = plan("precision=choice(bf16,fp8)")  # parallel.compile is none by default
    assert choices == {"precision": ["bf16"]}
    assert notes == ["removed from the search space, they break a rule with a fixed value: "
                     "precision=fp8 (parallel.compile must not be none with precision=fp8 (torchao's float8 casts "
                     "are fast only when compiled; eager fp8 is slower than bf16); got parallel.compile=none; "
                     "fix: parallel.compile=default)"]
    choices, _ = plan("precision=fp8", "parallel.compile=choice(none,default,max-autotune)")
    assert choices == {"parallel.compile": ["default", "max-autotune"]}
    choices, notes = plan("model_pruning.method='2:4'", "model_pruning.ratio=0.5", "precision=choice(fp32,bf16,fp16)")
    assert choices == {"precision": ["bf16", "fp16"]} and notes[0].startswith(
        "removed from the search space, they break a rule with a fixed value: precision=fp32 (precision must be")


def test_values_that_clash_only_with_another_swept_value_stay_and_are_never_proposed_together():
    choices, notes = plan("precision=choice(bf16,fp8)", "parallel.compile=choice(none,default)")
    assert choices == {"precision": ["bf16", "fp8"], "parallel.compile": ["none", "default"]}
    assert notes == ["never proposed together, they break a rule here: precision=fp8 with parallel.compile=none "
                     "(parallel.compile must not be none with precision=fp8 (torchao's float8 casts are fast only "
                     "when compiled; eager fp8 is slower than bf16); got parallel.compile=none; "
                     "fix: parallel.compile=default)"]


def test_forcing_both_sides_of_a_rule_is_bad_input():
    from search.errors import BadInput

    with pytest.raises(BadInput, match="parallel.compile must not be none with precision=fp8"):
        plan("precision=fp8", "parallel.compile=none", "batch_size=choice(32,64)")
    with pytest.raises(BadInput, match="parallel.compile has no value this machine and the fixed settings allow"):
        plan("precision=fp8", "parallel.compile=choice(none)")


@pytest.mark.slow
def test_a_forced_fp8_without_compile_exits_2_before_anything_is_created(tmp_path, monkeypatch):
    from conftest import run_search
    from sweep_results import assert_one_line_and_nothing_created

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    result = run_search("multirun", "precision=fp8", "parallel.compile=none", cwd=tmp_path, timeout_s=120)
    # What this machine cannot run is said first: compiling would not make fp8 run without an fp8 GPU.
    from objectives import ConfigError
    from objectives.config import parse_values, with_values
    from objectives.knobs import check_hardware
    from search.measure.machine import machine_hardware

    try:
        check_hardware(with_values(parse_values({}), {"precision": "fp8"}), machine_hardware())
        fp8_here = True
    except ConfigError:
        fp8_here = False
    assert_one_line_and_nothing_created(tmp_path, result, "parallel.compile must not be none with precision=fp8"
                                        if fp8_here else "this machine cannot run the fixed settings: precision=fp8")
