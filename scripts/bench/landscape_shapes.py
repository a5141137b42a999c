"""What a synthetic landscape is, and the named library of them.

A landscape is a search space (knob -> values, the baseline's value among them) and terms: a term names values
of one or more knobs and, where a cell holds all of them, multiplies its throughput by `speed` and adds
`accuracy` to its val_accuracy. Per-knob effects are terms on one knob, interactions terms on several. Walls
are cells that end without a result (`oom`, `infeasible`). landscapes.py turns a landscape into a grid table
in the format of scripts/bench/data/*.csv; this module only says what each landscape looks like and why.

Accuracy terms name maths knobs only and speed terms never name work-neutral ones (optim.lr), the knobs'
conventions (objectives/knobs); landscapes.py checks both.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Term:
    """Where every knob of `when` holds one of its values: throughput times `speed`, val_accuracy plus `accuracy`."""
    when: tuple[tuple[str, tuple], ...]
    speed: float = 1.0
    accuracy: float = 0.0

    def applies(self, cell: dict) -> bool:
        return all(cell[k] in values for k, values in self.when)


@dataclass(frozen=True)
class Wall:
    """Cells where every knob of `when` holds one of its values end with `outcome` (no metrics) and `reason`."""
    when: tuple[tuple[str, tuple], ...]
    outcome: str
    reason: str

    def applies(self, cell: dict) -> bool:
        return all(cell[k] in values for k, values in self.when)


@dataclass
class Landscape:
    """A synthetic grid: space, terms, walls, and how its trials' times and noise are made."""
    name: str
    split: str  # "A" or "B": the half of the library it belongs to
    hardware: dict  # {"gpu", "bf16_native", "cores", "gpu_memory_gb"}: the machine it pretends to be
    space: dict[str, list]  # knob -> values (Python values, as Hydra's grammar parses them)
    terms: list[Term]
    structure: str  # its shape and why its best is where it is (landscapes.py adds where that is)
    walls: list[Wall] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)  # Hydra overrides its trials "ran" with (budget, objective)
    speed: float = 1000.0  # samples/s of a cell no term applies to
    accuracy: float = 0.95  # val_accuracy of a cell no term applies to
    noise: float = 0.0  # throughput times 1 + u, u uniform in +-noise, drawn per work (cells equal but for lr)
    accuracy_noise: float = 0.0  # val_accuracy plus u, u uniform in +-accuracy_noise, drawn per model (maths)
    startup_s: float = 3.0  # a trial's start-up before training (plus 0.5 s per loader worker)
    eval_s: float = 0.5
    compile_s: dict = field(default_factory=lambda: {"default": 40.0, "reduce-overhead": 60.0,
                                                     "max-autotune": 240.0})
    seed: int = 0  # of its noise draws


def on(when: dict, speed: float = 1.0, accuracy: float = 0.0) -> Term:
    """A term; a value of `when` that is not a tuple is the only value."""
    return Term(_condition(when), speed, accuracy)


def wall(when: dict, outcome: str, reason: str) -> Wall:
    return Wall(_condition(when), outcome, reason)


def _condition(when: dict) -> tuple[tuple[str, tuple], ...]:
    return tuple((k, v if isinstance(v, tuple) else (v,)) for k, v in when.items())


def per_value(knob: str, speed: dict | None = None, accuracy: dict | None = None) -> list[Term]:
    """One term per value of one knob: its throughput factor and its accuracy shift (absent: 1 and 0)."""
    speed, accuracy = speed or {}, accuracy or {}
    return [on({knob: v}, speed.get(v, 1.0), accuracy.get(v, 0.0)) for v in dict.fromkeys([*speed, *accuracy])]


def lr_bowl(batches: list[int], lrs: list[float], best_at_64: float, exponent: float, depth: float) -> list[Term]:
    """val_accuracy falls by depth * log2(lr / best)^2, the best lr moving with the batch size as
    best_at_64 * (batch / 64) ** exponent: the learning rate that trains best depends on the batch."""
    terms = []
    for b in batches:
        best = best_at_64 * (b / 64) ** exponent
        terms += [on({"batch_size": b, "optim.lr": lr}, accuracy=-depth * math.log2(lr / best) ** 2) for lr in lrs]
    return terms


def by_global_batch(batches: list[int], knob: str, multiples: list[int], accuracy: dict[int, float]) -> list[Term]:
    """val_accuracy by the global batch (batch_size times `knob`: devices or grad_accum), a fixed sample budget
    taking fewer optimizer steps at larger global batches."""
    return [on({"batch_size": b, knob: m}, accuracy=accuracy[b * m]) for b in batches for m in multiples]


def gpu(name: str, memory_gb: float, cores: int, bf16: bool = True) -> dict:
    return {"gpu": name, "bf16_native": bf16, "cores": cores, "gpu_memory_gb": memory_gb}


def cpu(cores: int, bf16: bool) -> dict:
    return {"gpu": None, "bf16_native": bf16, "cores": cores, "gpu_memory_gb": None}


H200 = gpu("NVIDIA H200", 141.0, 16)
H100 = gpu("NVIDIA H100 80GB HBM3", 80.0, 16)
A100 = gpu("NVIDIA A100-SXM4-40GB", 40.0, 12)
V100 = gpu("Tesla V100-SXM2-16GB", 16.0, 8, bf16=False)
CPU2 = cpu(2, bf16=False)  # like the machine that measured the digits grids
CPU8_AMX = cpu(8, bf16=True)
CPU32_AMX = cpu(32, bf16=True)
GPU_TIMES = {"startup_s": 20.0, "eval_s": 8.0}
OOM = "CUDA out of memory (synthetic: activations at this batch do not fit)"
HALF = ("bf16", "fp16")


def gpu_compile_bf16() -> Landscape:
    return Landscape(
        "gpu_compile_bf16", "A", H200, {
            "batch_size": [8, 16, 32, 64], "precision": ["fp32", "tf32", "bf16", "fp16"],
            "parallel.compile": ["none", "default", "max-autotune"], "optim.fused": [False, True],
            "memory.activation_checkpointing": [False, True], "loader.num_workers": [0, 4],
            "model_pruning.ratio": [0.0, 0.5]},
        [*per_value("batch_size", {8: 0.78, 32: 1.1, 64: 1.15}, {8: 0.003, 32: -0.002, 64: -0.008}),
         *per_value("precision", {"tf32": 1.3, "bf16": 1.8, "fp16": 1.75},
                    {"tf32": -0.0005, "bf16": -0.001, "fp16": -0.0015}),
         on({"parallel.compile": "default", "precision": ("fp32", "tf32")}, 1.02),
         on({"parallel.compile": "max-autotune", "precision": ("fp32", "tf32")}, 1.03),
         on({"parallel.compile": "default", "precision": HALF}, 1.69),
         on({"parallel.compile": "max-autotune", "precision": HALF}, 1.8),
         *per_value("optim.fused", {True: 1.03}), on({"optim.fused": True, "precision": "fp16"}, 1.03),
         *per_value("memory.activation_checkpointing", {True: 0.75}), *per_value("loader.num_workers", {4: 1.02}),
         *per_value("model_pruning.ratio", {0.5: 1.3}, {0.5: -0.015})],
        "gpt2-small on an H200 (search=gpu objective=gpt): precision tf32 1.3x, bf16 1.8x fp32; compile pays 1.02x "
        "at fp32/tf32 but 1.69x (max-autotune 1.8x) at bf16/fp16; fused AdamW a few percent; activation "
        "checkpointing 0.75x; batch 64 runs out of memory at fp32/tf32 without checkpointing and falls below the "
        "floor anyway, and pruning half the MLPs is 1.3x faster but 1.5 points less accurate. The best stacks "
        "half precision, compile and batch 32, the largest batch at the floor.",
        [wall({"batch_size": 64, "precision": ("fp32", "tf32"), "memory.activation_checkpointing": False}, "oom",
              OOM)],
        ["search=gpu", "objective=gpt"], speed=38.0, accuracy=0.615, startup_s=25.0, eval_s=12.0,
        compile_s={"default": 70.0, "max-autotune": 420.0}, seed=1)


def oom_wall() -> Landscape:
    return Landscape(
        "oom_wall", "B", H100, {
            "batch_size": [32, 64, 128, 256, 512, 1024, 2048], "precision": ["fp32", "bf16", "fp16"],
            "memory.activation_checkpointing": [False, True], "loader.num_workers": [0, 2, 4, 8]},
        [*per_value("batch_size", {32: 0.6, 128: 1.6, 256: 2.3, 512: 3.0, 1024: 3.5, 2048: 3.8},
                    {32: 0.002, 128: -0.001, 256: -0.0015, 512: -0.002, 1024: -0.0025, 2048: -0.003}),
         *per_value("precision", {"bf16": 1.7, "fp16": 1.65}, {"bf16": -0.0005, "fp16": -0.001}),
         *per_value("memory.activation_checkpointing", {True: 0.75}),
         *per_value("loader.num_workers", {2: 1.15, 4: 1.25, 8: 1.28})],
        "Throughput rises with the batch to an out-of-memory wall: fp32 fits up to batch 256 without activation "
        "checkpointing, bf16/fp16 up to 512; checkpointing moves the wall to 1024 (fp32) and past 2048 (half "
        "precision) but costs 25%, more than the larger batch gives. Every batch meets the floor, so the best is the "
        "largest batch that fits without checkpointing, in half precision.",
        [wall({"batch_size": (512, 1024, 2048), "precision": "fp32", "memory.activation_checkpointing": False},
              "oom", OOM),
         wall({"batch_size": (1024, 2048), "precision": HALF, "memory.activation_checkpointing": False}, "oom", OOM),
         wall({"batch_size": 2048, "precision": "fp32"}, "oom", OOM)],
        ["train.budget_samples=100000"], speed=2500.0, accuracy=0.94, **GPU_TIMES, seed=2)


def batch_accuracy_cliff() -> Landscape:
    return Landscape(
        "batch_accuracy_cliff", "A", A100, {
            "batch_size": [16, 32, 64, 128, 256, 512, 1024], "precision": ["fp32", "tf32", "bf16"],
            "loader.num_workers": [0, 2, 4, 8], "framework.channels_last": [False, True]},
        [*per_value("batch_size", {16: 0.35, 32: 0.6, 128: 1.5, 256: 2.0, 512: 2.4, 1024: 2.6},
                    {16: 0.006, 32: 0.004, 128: -0.003, 256: -0.012, 512: -0.03, 1024: -0.07}),
         *per_value("precision", {"tf32": 1.25, "bf16": 1.6}, {"bf16": -0.001}),
         *per_value("loader.num_workers", {2: 1.3, 4: 1.45, 8: 1.5}),
         on({"framework.channels_last": True, "precision": ("fp32", "tf32")}, 0.98),
         on({"framework.channels_last": True, "precision": "bf16"}, 1.12)],
        "At a fixed sample budget a larger batch takes fewer optimizer steps: throughput rises up to batch 1024 but "
        "val_accuracy falls, past the floor from batch 256 on. The answer is batch 128, the largest that still "
        "meets the floor, not the fastest batch; channels_last pays only at bf16.",
        overrides=["train.budget_samples=20000"], speed=3000.0, accuracy=0.93, **GPU_TIMES, seed=3)


def needle() -> Landscape:
    return Landscape(
        "needle", "A", H100, {
            "batch_size": [32, 64, 128, 256], "precision": ["fp32", "tf32", "bf16", "fp16"],
            "framework.channels_last": [False, True], "parallel.compile": ["none", "default", "max-autotune"],
            "loader.num_workers": [0, 2, 4, 8], "optim.fused": [False, True]},
        [*per_value("batch_size", {32: 0.93, 128: 1.06, 256: 1.1}, {32: 0.001, 256: -0.003}),
         *per_value("precision", {"tf32": 1.08, "bf16": 1.12, "fp16": 1.1}, {"bf16": -0.001, "fp16": -0.0015}),
         *per_value("framework.channels_last", {True: 0.95}),
         *per_value("parallel.compile", {"default": 1.04, "max-autotune": 0.97}),
         *per_value("loader.num_workers", {2: 1.05, 4: 1.07, 8: 1.06}), *per_value("optim.fused", {True: 1.02}),
         on({"precision": "fp16", "framework.channels_last": True, "parallel.compile": "max-autotune"}, 2.8)],
        "A needle: everything lies within 0.85-1.4x of the baseline except fp16 + channels_last + max-autotune "
        "together, 2.8x on top (a kernel the autotuner finds only in that layout and dtype), while each of the three "
        "alone gains little or loses. No search can be expected to find it fast; it shows the worst case.",
        overrides=["train.budget_samples=50000"], speed=1800.0, accuracy=0.92, **GPU_TIMES, seed=4)


def plateau() -> Landscape:
    batches, workers = [16, 32, 64, 128, 256], [0, 1, 2, 4, 8]
    ridge = [on({"batch_size": b, "loader.num_workers": w},
                1 + 0.35 * math.exp(-(i - j) ** 2 / 0.5) * math.exp(-((i + j) / 2 - 3) ** 2 / 4))
             for i, b in enumerate(batches) for j, w in enumerate(workers)]
    return Landscape(
        "plateau", "B", CPU8_AMX, {
            "batch_size": batches, "loader.num_workers": workers, "parallel.threads": [1, 2, 4, 8],
            "precision": ["fp32", "bf16"]},
        [*ridge, *per_value("parallel.threads", {2: 1.015, 4: 1.02, 8: 1.005}),
         *per_value("precision", {"bf16": 1.01}, {"bf16": -0.0005}),
         *per_value("batch_size", accuracy={16: 0.003, 32: 0.001, 128: -0.002, 256: -0.004})],
        "A plateau: most cells within a few percent of the baseline (1.5% measurement noise on top), and a gentle "
        "ridge where the loader workers grow with the batch (batch index = worker index), rising to 1.35x at batch "
        "128 with 4 workers; threads and bf16 add 1-2%.",
        overrides=["train.budget_samples=8000"], speed=900.0, accuracy=0.9, noise=0.015, seed=5)


def workers_threads_2core() -> Landscape:
    batches = [16, 32, 64, 128, 256]
    by_global = {16: 0.006, 32: 0.003, 64: 0.0, 128: -0.0035, 256: -0.012, 512: -0.03}
    return Landscape(
        "workers_threads_2core", "A", CPU2, {
            "batch_size": batches, "loader.num_workers": [0, 1, 2], "parallel.threads": [1, 2],
            "parallel.devices": [1, 2], "precision": ["fp32", "bf16"], "model_pruning.ratio": [0.0, 0.5]},
        [*per_value("batch_size", {16: 0.5, 32: 0.75, 128: 1.2, 256: 1.3}),
         *by_global_batch(batches, "parallel.devices", [1, 2], by_global),
         *per_value("loader.num_workers", {1: 1.35, 2: 1.4}), *per_value("parallel.threads", {2: 1.55}),
         on({"loader.num_workers": (1, 2), "parallel.threads": 2}, 0.6),
         *per_value("parallel.devices", {2: 1.6}), on({"loader.num_workers": (1, 2), "parallel.devices": 2}, 0.6),
         *per_value("precision", {"bf16": 0.7}, {"bf16": -0.001}),
         *per_value("model_pruning.ratio", {0.5: 1.4}, {0.5: -0.012})],
        "Two cores: loader workers (1.35-1.4x) and a second intra-op thread (1.55x) each pay alone but not together "
        "(they fight for the cores: 0.6x); two DDP ranks pay 1.6x with one thread each, are infeasible with two, "
        "and double the global batch (less accurate). bf16 is slower without native support. The best: one knob "
        "of the pair, at the largest global batch that meets the floor.",
        [wall({"parallel.devices": 2, "parallel.threads": 2}, "infeasible",
              "parallel.devices * parallel.threads must be <= the CPU cores available (2); got 2 * 2 = 4; "
              "fix: parallel.devices=2 parallel.threads=1")],
        ["train.budget_samples=8000"], speed=800.0, accuracy=0.9, seed=6)


def lr_batch_gpt() -> Landscape:
    batches, lrs = [16, 32, 64, 128, 256, 512], [0.0005, 0.001, 0.002, 0.004, 0.008, 0.016]
    return Landscape(
        "lr_batch_gpt", "A", CPU8_AMX, {
            "batch_size": batches, "optim.lr": lrs, "precision": ["fp32", "bf16"], "parallel.threads": [1, 2, 4, 8]},
        [*per_value("batch_size", {16: 0.45, 32: 0.7, 128: 1.3, 256: 1.55, 512: 1.7},
                    {16: 0.001, 32: 0.0005, 128: -0.0015, 256: -0.003, 512: -0.0045}),
         *lr_bowl(batches, lrs, 0.002, 0.5, 0.012),
         *per_value("precision", {"bf16": 1.6}, {"bf16": -0.001}),
         *per_value("parallel.threads", {2: 1.7, 4: 2.6, 8: 3.2})],
        "The tiny GPT (objective=gpt, lr 0.002) on 8 cores with AMX: the best learning rate grows with the batch "
        "(0.002 at 64, 0.004 at 256); at the baseline's lr every batch above 128 falls below the floor, so a "
        "larger batch pays only with a larger lr (lr is work-neutral: it never changes throughput). The best: "
        "batch 256 at lr 0.004, bf16, 8 threads.",
        overrides=["objective=gpt"], speed=400.0, accuracy=0.46, seed=7)


def cpu_digits_like() -> Landscape:
    return Landscape(
        "cpu_digits_like", "B", CPU2, {
            "batch_size": [16, 32, 64, 128, 256, 512], "loader.num_workers": [0, 1, 2],
            "precision": ["fp32", "bf16"], "model_pruning.ratio": [0.0, 0.25, 0.5, 0.75], "parallel.threads": [1, 2]},
        [*per_value("batch_size", {16: 0.55, 32: 0.8, 128: 1.2, 256: 1.35, 512: 1.4},
                    {16: 0.01, 32: 0.005, 128: -0.003, 256: -0.015, 512: -0.04}),
         *per_value("model_pruning.ratio", {0.25: 1.15, 0.5: 1.35, 0.75: 1.6},
                    {0.25: -0.0025, 0.5: -0.012, 0.75: -0.04}),
         *per_value("precision", {"bf16": 0.8}, {"bf16": -0.001}),
         *per_value("loader.num_workers", {1: 1.08, 2: 1.1}), *per_value("parallel.threads", {2: 1.35}),
         on({"loader.num_workers": (1, 2), "parallel.threads": 2}, 0.85)],
        "Shaped like the measured digits grids on 2 cores without native bf16: larger batches and pruning are "
        "faster but less accurate, bf16 is 0.8x, a second thread 1.35x, workers a little (less with two threads). "
        "The best meets the floor with batch 128 unpruned and two threads; batch 64 pruned 25% is a close second.",
        overrides=["train.budget_samples=8000"], speed=700.0, accuracy=0.9, seed=8)


def noisy_gpu_resnet() -> Landscape:
    return Landscape(
        "noisy_gpu_resnet", "A", H100, {
            "batch_size": [32, 64, 128, 256, 512], "precision": ["fp32", "tf32", "bf16", "fp16"],
            "framework.channels_last": [False, True], "loader.num_workers": [0, 4, 8, 16],
            "framework.cudnn_benchmark": [False, True]},
        [*per_value("batch_size", {32: 0.8, 128: 1.15, 256: 1.25, 512: 1.3}, {256: -0.003, 512: -0.008}),
         *per_value("loader.num_workers", {4: 2.2, 8: 3.0, 16: 3.1}),
         *per_value("precision", {"tf32": 1.2, "bf16": 1.5, "fp16": 1.5}, {"bf16": -0.001, "fp16": -0.001}),
         on({"precision": HALF, "loader.num_workers": (0, 4)}, 0.75),
         on({"framework.channels_last": True, "precision": HALF}, 1.25),
         on({"framework.channels_last": True, "precision": ("fp32", "tf32")}, 0.97),
         *per_value("framework.cudnn_benchmark", {True: 1.05})],
        "An image model bound by its data loader: workers give up to 3.1x and half precision pays fully only once "
        "the loader keeps up (8+ workers); channels_last pays only at bf16/fp16. On top, +-10% uniform noise on "
        "every work's throughput and +-0.5 points on every model's val_accuracy, so near-equal cells swap places.",
        overrides=["train.budget_samples=50000"], speed=1200.0, accuracy=0.91, noise=0.10, accuracy_noise=0.005,
        **GPU_TIMES, seed=9)


def v100_fp16() -> Landscape:
    batches, accum = [32, 64, 128, 256, 512], [1, 2, 4]
    by_global = {32: 0.002, 64: 0.0, 128: -0.0015, 256: -0.003, 512: -0.01, 1024: -0.02, 2048: -0.04}
    return Landscape(
        "v100_fp16", "B", V100, {
            "batch_size": batches, "precision": ["fp32", "bf16", "fp16"], "optim.fused": [False, True],
            "memory.activation_checkpointing": [False, True], "parallel.grad_accum": accum},
        [*per_value("batch_size", {32: 0.7, 128: 1.25, 256: 1.4, 512: 1.5}),
         *by_global_batch(batches, "parallel.grad_accum", accum, by_global),
         *per_value("precision", {"bf16": 0.85, "fp16": 2.1}, {"bf16": -0.0015, "fp16": -0.001}),
         *per_value("optim.fused", {True: 1.04}), *per_value("memory.activation_checkpointing", {True: 0.75}),
         *per_value("parallel.grad_accum", {2: 1.04, 4: 1.06})],
        "A 16 GB V100 without native bf16: bf16 is slower than fp32 (0.85x), fp16 2.1x on tensor cores; batches "
        "of 256+ run out of memory at fp32 and 512 at fp16 without checkpointing; gradient accumulation multiplies "
        "the global batch (less accurate past 256). The best: fp16 at batch 256, no accumulation, fused AdamW.",
        [wall({"batch_size": (256, 512), "precision": "fp32", "memory.activation_checkpointing": False}, "oom", OOM),
         wall({"batch_size": 512, "precision": ("bf16", "fp16"), "memory.activation_checkpointing": False}, "oom",
              OOM),
         wall({"batch_size": 512, "precision": "fp32"}, "oom", OOM)],
        ["train.budget_samples=50000"], speed=1100.0, accuracy=0.92, **GPU_TIMES, seed=10)


def cpu_many_cores() -> Landscape:
    return Landscape(
        "cpu_many_cores", "B", CPU32_AMX, {
            "batch_size": [32, 64, 128, 256], "parallel.threads": [1, 2, 4, 8, 16, 32],
            "loader.num_workers": [0, 2, 4, 8], "precision": ["fp32", "bf16"], "parallel.compile": ["none", "default"]},
        [*per_value("batch_size", {32: 0.85, 128: 1.1, 256: 1.15}, {32: 0.001, 128: -0.002, 256: -0.006}),
         *per_value("parallel.threads", {2: 1.9, 4: 3.4, 8: 5.5, 16: 7.0, 32: 6.0}),
         *per_value("loader.num_workers", {2: 1.1, 4: 1.12, 8: 1.1}),
         on({"loader.num_workers": (4, 8), "parallel.threads": 32}, 0.85),
         *per_value("precision", {"bf16": 1.5}, {"bf16": -0.001}),
         on({"parallel.compile": "default", "precision": "fp32"}, 1.05),
         on({"parallel.compile": "default", "precision": "bf16"}, 1.35)],
        "32 cores with AMX: threads scale to 16 then lose (32 threads plus loader workers oversubscribe); bf16 is "
        "1.5x and compile pays mostly with bf16; batch 256 falls below the floor. 8% noise on throughput, 0.3 "
        "points on accuracy. The best: 16 threads, bf16, compiled, batch 128.",
        overrides=["train.budget_samples=8000"], speed=300.0, accuracy=0.9, noise=0.08, accuracy_noise=0.003,
        compile_s={"default": 25.0, "max-autotune": 120.0}, seed=11)


def lr_linear_a100() -> Landscape:
    batches, lrs = [64, 128, 256, 512, 1024], [0.001, 0.0025, 0.005, 0.01, 0.02, 0.04]
    return Landscape(
        "lr_linear_a100", "B", A100, {
            "batch_size": batches, "optim.lr": lrs, "precision": ["fp32", "tf32", "bf16"],
            "loader.num_workers": [0, 4]},
        [*per_value("batch_size", {128: 1.5, 256: 2.0, 512: 2.3, 1024: 2.45},
                    {128: -0.001, 256: -0.002, 512: -0.003, 1024: -0.0035}),
         *lr_bowl(batches, lrs, 0.005, 0.5, 0.01),
         *per_value("precision", {"tf32": 1.4, "bf16": 1.9}, {"bf16": -0.0005}),
         *per_value("loader.num_workers", {4: 1.3})],
        "The best configured learning rate grows as the square root of the batch (0.005 at 64, 0.02 at 1024), on "
        "top of the trainer's own sqrt scaling; the choices hit it at batches 64, 256 and 1024 and miss it between, "
        "so accuracy zig-zags with the batch. 5% noise on throughput. The best: batch 1024 at lr 0.02.",
        overrides=["train.budget_samples=20000"], speed=2500.0, accuracy=0.93, noise=0.05, **GPU_TIMES, seed=12)


LIBRARY = [gpu_compile_bf16, oom_wall, batch_accuracy_cliff, needle, plateau, workers_threads_2core, lr_batch_gpt,
           cpu_digits_like, noisy_gpu_resnet, v100_fp16, cpu_many_cores, lr_linear_a100]
