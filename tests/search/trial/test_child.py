"""What a trial's child process is started with: the allocator's settings
and the CUDA device order in its environment before torch starts CUDA, on
the real CLI and the real forkserver child (this machine has no GPU: what
is checked is the environment torch reads, not a CUDA allocation)."""
from __future__ import annotations

from pathlib import Path

from objectives.knobs.memory import allocator_conf, apply_expandable_segments

from conftest import REPO, TESTS, pythonpath, run_search

ENV_OBJECTIVE = ["objective=custom", "objective.callable=env_objective:objective"]


def test_allocator_settings_merge_the_knob_into_the_users_own() -> None:
    assert allocator_conf(True, None) == "expandable_segments:True"
    assert allocator_conf(True, "max_split_size_mb:64, expandable_segments:False") == \
        "max_split_size_mb:64,expandable_segments:True"
    assert allocator_conf(False, "expandable_segments:True,garbage_collection_threshold:0.8") == \
        "garbage_collection_threshold:0.8,expandable_segments:False"
    # A user's PYTORCH_ALLOC_CONF says the same as the knob, whichever name torch reads first.
    environ = {"PYTORCH_ALLOC_CONF": "expandable_segments:False,max_split_size_mb:64"}
    apply_expandable_segments(True, environ)
    assert environ == {"PYTORCH_ALLOC_CONF": "max_split_size_mb:64,expandable_segments:True",
                       "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64,expandable_segments:True"}
    environ = {}
    apply_expandable_segments(False, environ)
    assert environ == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False"}


def test_the_trial_process_starts_with_expandable_segments_and_the_pci_device_order(workdir: Path) -> None:
    env = {"PYTHONPATH": pythonpath(REPO, TESTS), "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64"}
    result = run_search("run", *ENV_OBJECTIVE, "memory.expandable_segments=true", cwd=workdir, env=env, timeout_s=300)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {line.split()[1]: line.split()[3] for line in result.stdout.splitlines()
            if line.startswith("│") and len(line.split()) >= 4}
    assert rows.get("allocator_expandable_segments") == "1", result.stdout
    assert rows.get("allocator_keeps_user_setting") == "1", result.stdout
    assert rows.get("cuda_device_order_pci_bus") == "1", result.stdout


def test_every_isolated_trial_counts_cuda_devices_in_pci_bus_order() -> None:
    from search.trial.isolate import run_isolated

    # any caller of the isolated child (selftest, the batch-size probe, benchmark scripts), not only the CLI
    result = run_isolated({"objective": {"name": "custom", "callable": "env_objective:objective"}}, timeout_s=120)
    assert result["outcome"] == "ok", result["reason"]
    assert result["metrics"]["cuda_device_order_pci_bus"] == 1.0


def _slow_compile_trial(compile_s: float, compile_timeout_s: float, timeout_s: float = 6.0) -> dict:
    from search.trial.isolate import run_isolated, warm_up

    warm_up().join()  # the forkserver's own start (it imports torch) is not the trial's time
    cfg = {"objective": {"name": "custom", "callable": "slow_compile_objective:objective"},
           "slow": {"compile_s": compile_s, "train_s": 0.2}, "trial": {"compile_timeout_s": compile_timeout_s}}
    return run_isolated(cfg, timeout_s=timeout_s)


def test_compile_time_counts_against_its_own_budget_not_the_trials_timeout() -> None:
    # The compile sleeps 8 s, past trial.timeout_s=6 on any machine (was: a timeout, compiling counted);
    # what is left, a child forked from the warm forkserver and 0.2 s of steps, fits in 6 s even on a loaded machine.
    ok = _slow_compile_trial(compile_s=8.0, compile_timeout_s=60)
    assert ok["outcome"] == "ok", ok["reason"]
    assert ok["metrics"]["compile_s"] >= 8.0 and ok["metrics"]["trial_wall_s"] > 8.0
    # Past its own budget the compile counts like any other time: 6 s + 1 s < 8 s, whatever the load.
    late = _slow_compile_trial(compile_s=8.0, compile_timeout_s=1)
    assert late["outcome"] == "timeout"
    assert late["reason"] == ("ran past trial.timeout_s=6 plus 1 s of torch.compile "
                              "(up to trial.compile_timeout_s=1 s is not counted)")


def test_the_child_runs_the_config_the_sweep_parsed_and_does_not_parse_the_dict_again() -> None:
    """Parse once: the typed config handed to isolation is what the child runs. The dict beside it
    breaks a rule (budget_samples=0): parsed again, the trial would end infeasible instead."""
    from objectives import parse_config
    from search.trial.isolate import run_isolated

    handed = parse_config({"objective": {"name": "custom", "callable": "env_objective:objective"}})
    result = run_isolated({"objective": {"name": "digits"}, "train": {"budget_samples": 0}}, timeout_s=120,
                          parsed=handed)
    assert result["outcome"] == "ok", result["reason"]
    assert result["metrics"]["cuda_device_order_pci_bus"] == 1.0
    refused = run_isolated({"objective": {"name": "digits"}, "train": {"budget_samples": 0}}, timeout_s=120)
    assert refused["outcome"] == "infeasible" and "train.budget_samples" in refused["reason"], refused["reason"]


def test_run_says_when_a_key_you_set_has_no_effect(workdir: Path) -> None:
    """A user pass ran `run loader.num_workers=0 loader.persistent_workers=true` (an exported contender) and got
    no word that persistent workers change nothing without workers."""
    result = run_search("run", "loader.num_workers=0", "loader.persistent_workers=true", "train.budget_samples=600",
                        cwd=workdir, timeout_s=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("note: loader.persistent_workers=true: without effect beside this configuration's "
                               "other values") == 1, result.stderr
    with_workers = run_search("run", "loader.num_workers=1", "loader.persistent_workers=true",
                              "train.budget_samples=600", cwd=workdir, timeout_s=300)
    assert with_workers.returncode == 0 and "without effect" not in with_workers.stderr, with_workers.stderr
    # export writes every knob of the space: its default beside no workers is no setting of yours without effect
    from objectives import parse_config
    from search.trial.app import _is_default

    defaults = parse_config({"objective": {"name": "digits"}, "loader": {"persistent_workers": False}})
    assert _is_default(defaults, "loader.persistent_workers") and _is_default(defaults, "loader.prefetch_factor")
    assert not _is_default(parse_config({"objective": {"name": "digits"}, "loader": {"prefetch_factor": 4}}),
                           "loader.prefetch_factor")
