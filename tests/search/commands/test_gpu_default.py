"""The GPU default of `python -m search multirun` (search/commands/gpu_default.py):
a GPU and no objective=/search= -> objective=gpt search=gpu, said in one line;
a chosen objective -> search=gpu for it; a chosen space -> left alone; no GPU
-> unchanged and silent. GPU facts as data, or NVML faked at its one seam."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from objectives import parse_config
from search.commands import gpu_default as gd
from search.commands.gpu_default import Choice, GpuFacts, choose, detect, gpu_default
from search.commands.precheck import check_command_line
from search.measure import nvml
from search.sweep.space import build_space

from conftest import REPO, run_search
from fake_nvml import FakeNvml

H100 = "NVIDIA H100 80GB HBM3"
EIGHT_H100 = GpuFacts([H100] * 8, torch_cuda="12.8")


@pytest.fixture(autouse=True)
def choice_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SEARCH_GPU_DEFAULT", raising=False)  # a CI environment may have turned it off


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    def install(**kwargs) -> FakeNvml:
        f = FakeNvml(**kwargs)
        monkeypatch.setattr(nvml, "_nvml", f)
        return f
    return install


def compose_with(overrides: list[str]):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=True)


def test_a_gpu_and_no_choice_runs_gpt2_small_on_the_gpu_space_and_says_so(monkeypatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    choice = choose(["hydra.sweeper.n_trials=4"], EIGHT_H100)
    assert choice.overrides == ["objective=gpt", "search=gpu"]
    assert f"8 x {H100}" in choice.line and "objective=gpt search=gpu" in choice.line
    assert "8 at once" in choice.line and "objective=digits search=default" in choice.line
    assert "\n" not in choice.line


def test_the_line_names_the_visible_devices_and_mixed_models(monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    line = choose([], GpuFacts(["NVIDIA A100-SXM4-80GB", "NVIDIA L4"], torch_cuda="12.8")).line
    assert "NVIDIA A100-SXM4-80GB, NVIDIA L4 (CUDA_VISIBLE_DEVICES=1,0)" in line


@pytest.mark.parametrize("objective, says", [("digits", "fp8 left out"), ("custom", "activation checkpointing"),
                                             ("resnet", "224 px"), ("gpt", "gpt2-small")])
def test_a_chosen_objective_gets_the_gpu_space_for_it(objective: str, says: str) -> None:
    choice = choose([f"objective={objective}"], EIGHT_H100)
    assert choice.overrides == ["search=gpu"]
    assert f"objective={objective}" in choice.line and says in choice.line and "search=default" in choice.line


@pytest.mark.parametrize("args", [["search=default"], ["objective=gpt", "search=default"], ["search=gpu"],
                                  ["+search=default"]])
def test_a_chosen_space_is_left_alone(args: list[str]) -> None:
    assert choose(args, EIGHT_H100) == Choice([], None)


def test_no_gpu_changes_nothing_and_says_nothing(capsys) -> None:
    assert choose([], GpuFacts(why_none="NVML: libnvidia-ml.so.1 not found")) == Choice([], None)
    assert gpu_default(["hydra.sweeper.n_trials=2"], facts=GpuFacts()) == []
    assert capsys.readouterr() == ("", "")


def test_a_cpu_only_torch_keeps_the_cpu_default_and_says_how_to_fix_it() -> None:
    choice = choose([], GpuFacts([H100], torch_cuda=None))
    assert choice.overrides == [] and "CPU-only build" in choice.line and "fix: install a CUDA build" in choice.line


def test_the_line_goes_to_stdout_or_to_stderr_when_stdout_is_a_config(capsys) -> None:
    assert gpu_default([], facts=EIGHT_H100) == ["objective=gpt", "search=gpu"]
    out, err = capsys.readouterr()
    assert out.startswith("search: GPU default on") and err == ""
    assert gpu_default(["--help"], facts=EIGHT_H100) == ["objective=gpt", "search=gpu"]
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("search: GPU default on")


def test_keys_of_the_gpu_defaults_objective_are_checked_with_it(monkeypatch, capsys) -> None:
    """On an H100, `multirun objective.val_batches=4` failed with exit 2: the command line was checked
    against the CPU default (digits has no val_batches) before the GPU default was added."""
    from search.__main__ import hydra_arguments
    from search.errors import BadInput

    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    args = hydra_arguments("multirun", ["objective.val_batches=4", "objective.size=tiny"], gpu_facts=EIGHT_H100)
    assert args == ["objective.val_batches=4", "objective.size=tiny", "objective=gpt", "search=gpu"]
    assert capsys.readouterr().out.startswith("search: GPU default on")
    with pytest.raises(BadInput, match="Could not override 'objective.val_batches'"):
        hydra_arguments("multirun", ["objective.val_batches=4"], gpu_facts=GpuFacts())  # no GPU: digits


def test_another_config_tree_is_left_alone() -> None:
    assert gpu_default(["--config-name", "mine"], facts=EIGHT_H100) == []


def test_detect_reads_nvml_in_cuda_visible_devices_order(fake, monkeypatch) -> None:
    f = fake(gpus=3, names=["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA L4"])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    facts = detect()
    assert facts.names == ["NVIDIA L4", "NVIDIA A100-SXM4-80GB"] and f.initialised == 0
    uuid = f.nvmlDeviceGetUUID(SimpleNamespace(index=1))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", uuid)
    assert detect().names == ["NVIDIA H100 80GB HBM3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert detect() == GpuFacts(why_none="CUDA_VISIBLE_DEVICES hides every GPU")


def test_detect_without_gpus_or_nvml(fake, monkeypatch) -> None:
    fake(gpus=0)
    assert detect() == GpuFacts(why_none="NVML: no devices")

    class NoLibrary(FakeNvml):
        def nvmlInit(self):
            raise OSError("libnvidia-ml.so.1: cannot open shared object file")

    monkeypatch.setattr(nvml, "_nvml", NoLibrary())
    assert detect().names == [] and "libnvidia-ml" in detect().why_none


def test_detect_reads_the_torch_build_only_after_finding_a_gpu(fake, monkeypatch) -> None:
    fake(gpus=1)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    import torch

    assert detect() == GpuFacts(["NVIDIA H100 80GB HBM3"], torch_cuda=torch.version.cuda)


def test_with_fake_gpus_on_this_cpu_build_the_sweep_stays_as_it_was(fake, monkeypatch, capsys) -> None:
    fake(gpus=2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    import torch

    if torch.version.cuda is not None:
        pytest.skip("a CUDA build of torch: the GPU default applies here")
    assert gpu_default([]) == []
    assert "CPU-only build" in capsys.readouterr().out


def test_the_gpu_default_composes_to_gpt2_small_on_the_gpu_space() -> None:
    args = check_command_line(["hydra.sweeper.n_trials=4", *choose(["hydra.sweeper.n_trials=4"], EIGHT_H100).overrides])
    cfg = compose_with(args)
    assert cfg.objective.name == "gpt" and cfg.objective.size == "gpt2-small"
    assert cfg.hydra.sweeper.batch_size_probe is True and cfg.hydra.sweeper.n_trials == 4
    assert cfg.hydra.sweeper.study_name == "gpt-gpu"  # not the CPU space's study 'gpt'
    assert cfg.train.budget_samples == 32768 and cfg.train.eval_batch_size == 16 and cfg.trial.timeout_s == 1800
    assert cfg.train.window_steps == 50 and cfg.batch_size == 16  # the comparison point fits a 40 GB GPU in fp32
    assert cfg.parallel.devices == 1  # one trial per GPU
    space = build_space(OmegaConf.to_container(cfg.hydra.sweeper.params), [])
    varied = {key: tuple(d.choices) for key, d in space.distributions.items()}
    assert varied["precision"] == ("tf32", "bf16", "fp16", "fp8")
    assert set(varied["parallel.compile"]) == {"none", "default", "reduce-overhead", "max-autotune"}
    for key in ("loader.pin_memory", "optim.fused", "memory.activation_checkpointing", "parallel.grad_accum",
                "batch_size"):
        assert key in varied
    parse_config(_plain(["objective=gpt", "search=gpu"]))


def _plain(overrides: list[str]) -> dict:
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return OmegaConf.to_container(compose("config", overrides=overrides), resolve=True)


def test_a_users_override_wins_over_the_gpu_space() -> None:
    cfg = compose_with(["objective=gpt", "search=gpu", "objective.size=tiny", "train.budget_samples=512"])
    assert cfg.objective.size == "tiny" and cfg.train.budget_samples == 512


def test_a_cpu_machine_runs_the_cpu_default_exactly_as_before(workdir) -> None:
    shown = run_search("multirun", "--help", cwd=workdir, env={"CUDA_VISIBLE_DEVICES": ""})  # help shows the config
    assert shown.returncode == 0, shown.stderr
    assert "GPU default" not in shown.stdout + shown.stderr
    assert "name: digits" in shown.stdout and "gpt2-small" not in shown.stdout


def test_the_module_names_every_objective_it_has_a_note_for() -> None:
    have = {p.stem.removeprefix("gpu_") for p in (REPO / "conf" / "search_objective").glob("gpu_*.yaml")}
    assert have == set(gd.NOTES)


def test_doctor_and_selftest_line_says_what_multirun_sweeps_here() -> None:
    assert "objective=gpt search=gpu" in gd.what_multirun_runs(EIGHT_H100)
    assert "objective=digits search=default on the CPU (no usable GPU: NVML: no devices)" in gd.what_multirun_runs(
        GpuFacts(why_none="NVML: no devices"))
    assert "CPU-only build" in gd.what_multirun_runs(GpuFacts([H100], torch_cuda=None))


def test_search_gpu_default_0_turns_the_choice_off(monkeypatch, capsys) -> None:
    monkeypatch.setenv("SEARCH_GPU_DEFAULT", "0")
    assert gpu_default([], facts=EIGHT_H100) == [] and capsys.readouterr() == ("", "")
    assert "SEARCH_GPU_DEFAULT=0 turns the GPU default off" in gd.what_multirun_runs(EIGHT_H100)
    monkeypatch.setenv("SEARCH_GPU_DEFAULT", "1")
    assert gpu_default([], facts=EIGHT_H100) == ["objective=gpt", "search=gpu"]


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.cuda
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU")
def test_on_a_real_gpu_multirun_picks_gpt2_small_and_says_so(workdir) -> None:
    shown = run_search("multirun", "--help", cwd=workdir, env={"SEARCH_GPU_DEFAULT": "1"})
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr.startswith("search: GPU default on") and "objective=gpt search=gpu" in shown.stderr
    assert "size: gpt2-small" in shown.stdout and "budget_samples: 32768" in shown.stdout


def test_doctor_names_what_multirun_sweeps_here(workdir) -> None:
    shown = run_search("doctor", cwd=workdir, env={"SEARCH_GPU_DEFAULT": "1", "CUDA_VISIBLE_DEVICES": ""})
    assert shown.returncode == 0, shown.stdout[-2000:] + shown.stderr[-2000:]
    assert ("python -m search multirun sweeps objective=digits search=default on the CPU (no usable GPU: "
            in shown.stdout)
