"""On a GPU machine, `python -m search multirun` measures the GPU, not the CPU.

The CPU default (objective=digits search=default) renders every digits
sample on the CPU and varies CPU threads: on a GPU box its timed windows
last well under a second and it would rank configurations by the CPU. So
when the sweep sees at least one NVIDIA GPU (NVML, through
search/measure/nvml.py, CUDA_VISIBLE_DEVICES respected) that torch can use,
and the command line chose neither `objective=` nor `search=`, the sweep
runs `objective=gpt search=gpu` (GPT-2 small, conf/search/gpu.yaml and
conf/search_objective/gpu_gpt.yaml) and says so in one line at the start,
with the override that returns to the CPU default. A command line that chose
an objective but no space gets `search=gpu` for that objective (its
conf/search_objective/gpu_<objective>.yaml leaves out what it cannot apply);
one that chose a space is left alone. A machine without a GPU is left alone
and hears nothing: the sweep there is exactly what it was. SEARCH_GPU_DEFAULT=0
in the environment turns the choice off (the test suite's CLI runs set it,
so that a GPU machine runs the same tests as a CPU one).

The decision (`choose`) is a function of the command line and the GPU facts
(`detect`), so it is tested with facts as plain data and NVML faked at its
one seam; `detect` asks NVML, never torch.cuda, and reads torch's build
(`torch.version.cuda`) only once NVML has found a GPU, so a CPU machine does
not even import torch here.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Sequence

GPU_OBJECTIVE = "gpt"
GPU_SPACE = "gpu"
CPU_DEFAULT = "objective=digits search=default"
OPT_OUT = "SEARCH_GPU_DEFAULT"  # =0: never choose the GPU default (the test suite sets it)
# What `search=gpu` leaves out or adds for an objective the user chose (the YAML files say why at length).
NOTES = {
    "gpt": "gpt2-small, ~30 s of timed training per trial",
    "digits": "fp8 left out, its only Linear is too narrow; digits renders samples on the CPU, so its windows "
              "stay short and loader workers are swept; objective=gpt measures the GPU",
    "resnet": "224 px, channels_last and cuDNN benchmark swept, fp8 left out as its head converts nothing; "
              "images are made on the CPU, watch data_wait_fraction",
    "custom": "activation checkpointing left out, a custom model names no blocks; set train.budget_samples "
              "for >= 30 s of training per trial",
}


@dataclass(frozen=True)
class GpuFacts:
    """The GPUs this sweep would train on, as NVML names them, in CUDA's order."""

    names: list[str] = field(default_factory=list)
    torch_cuda: str | None = None  # torch.version.cuda: None for a CPU-only build of torch
    why_none: str = ""  # why no GPU was found, when none was


@dataclass(frozen=True)
class Choice:
    overrides: list[str]  # appended to the command line
    line: str | None  # what the sweep says at its start; None: nothing to say


def detect() -> GpuFacts:
    from search.measure import nvml

    reason = nvml.start()
    if reason is not None:
        return GpuFacts(why_none=f"NVML: {reason}")
    try:
        names = [nvml.device_name(nvml.handle(i)) for i in nvml.visible_indices(nvml.device_count())]
    except Exception as err:  # a broken driver: the CPU default, as without NVML
        return GpuFacts(why_none=f"NVML: {type(err).__name__}: {err}")
    finally:
        nvml.stop()
    if not names:
        return GpuFacts(why_none="CUDA_VISIBLE_DEVICES hides every GPU")
    return GpuFacts(names=names, torch_cuda=_torch_cuda_version())


def _torch_cuda_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.version.cuda


def chosen_groups(overrides: Sequence[str]) -> set[str]:
    """Which of objective/search the overrides choose (`objective=x`, `+search=y`, `~search`, ...)."""
    from search.sweep.space import parse_overrides

    return {o.key_or_group for o in parse_overrides(list(overrides))} & {"objective", "search"}


def choose(overrides: Sequence[str], facts: GpuFacts) -> Choice:
    """The overrides that make this sweep measure the GPU, and the line that says so."""
    chosen = chosen_groups(overrides)
    if not facts.names or "search" in chosen:
        return Choice([], None)
    gpus = describe_gpus(facts.names)
    if facts.torch_cuda is None:
        return Choice([], f"search: {gpus} found, but torch is a CPU-only build, so this sweep stays on the CPU "
                          f"({CPU_DEFAULT}); fix: install a CUDA build of torch for the GPU default "
                          f"(objective=gpt search=gpu)")
    slots = "one trial per GPU" + (f", {len(facts.names)} at once" if len(facts.names) > 1 else "")
    if "objective" in chosen:
        objective = _chosen_objective(overrides)
        note = NOTES.get(objective, f"no conf/search_objective/gpu_{objective}.yaml: the space as it is")
        return Choice([f"search={GPU_SPACE}"],
                      f"search: GPU default on {gpus}: search={GPU_SPACE} for objective={objective} ({note}; "
                      f"{slots}); for the CPU space add search=default")
    return Choice([f"objective={GPU_OBJECTIVE}", f"search={GPU_SPACE}"],
                  f"search: GPU default on {gpus}: objective={GPU_OBJECTIVE} search={GPU_SPACE} ({NOTES['gpt']}; "
                  f"{slots}); for the CPU default add {CPU_DEFAULT}")


def what_multirun_runs(facts: GpuFacts | None = None) -> str:
    """One line for doctor and selftest: what `python -m search multirun` with no overrides sweeps here."""
    if opted_out():
        return f"python -m search multirun sweeps {CPU_DEFAULT} ({OPT_OUT}={os.environ[OPT_OUT]} turns the GPU default off)"
    facts = detect() if facts is None else facts
    if not facts.names:
        return f"python -m search multirun sweeps {CPU_DEFAULT} on the CPU (no usable GPU: {facts.why_none})"
    choice = choose([], facts)
    if not choice.overrides:
        return choice.line.removeprefix("search: ")
    return (f"python -m search multirun sweeps the GPU default, {' '.join(choice.overrides)}, on "
            f"{describe_gpus(facts.names)}; add {CPU_DEFAULT} for the CPU default")


def opted_out() -> bool:
    return os.environ.get(OPT_OUT, "").strip().lower() in ("0", "off", "false", "no")


def describe_gpus(names: Sequence[str]) -> str:
    """'8 x NVIDIA H100 80GB HBM3' or 'NVIDIA A100, NVIDIA L4', and the CUDA_VISIBLE_DEVICES that chose them."""
    counts = {name: names.count(name) for name in names}
    text = ", ".join(name if n == 1 else f"{n} x {name}" for name, n in counts.items())
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return text + (f" (CUDA_VISIBLE_DEVICES={visible})" if visible is not None else "")


def _chosen_objective(overrides: Sequence[str]) -> str:
    from search.sweep.space import parse_overrides

    values = [o.value() for o in parse_overrides(list(overrides)) if o.key_or_group == "objective"]
    return str(values[-1]) if values else "?"


def gpu_default(args: Sequence[str], facts: GpuFacts | None = None) -> list[str]:
    """The overrides to add to `python -m search multirun ARGS`; prints the line that says why.

    Hydra's own flags are kept out of the decision; another config tree
    (--config-dir, --config-path, --config-name) is the user's, left alone."""
    from hydra._internal.utils import get_args_parser

    parsed = get_args_parser().parse_args(list(args))
    if parsed.config_dir or parsed.config_path or parsed.config_name:
        return []
    if opted_out():
        return []  # a test suite or CI job that must sweep the same thing on any machine
    if "search" in chosen_groups(parsed.overrides):
        return []  # no NVML call at all: the user chose the space
    choice = choose(parsed.overrides, detect() if facts is None else facts)
    if choice.line:
        quiet = parsed.cfg or parsed.info or parsed.help or parsed.hydra_help  # stdout is a config or help there
        print(choice.line, file=sys.stderr if quiet else sys.stdout, flush=True)
    return choice.overrides
