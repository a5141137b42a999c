"""`python -m search selftest` on this machine: the real CLI, real torch, isolated trials.

On a CPU it runs the CPU values (fp32, bf16, DDP over gloo, Inductor compile
modes, model pruning, the loader and memory switches) and lists the GPU
values as skipped with the hardware check's reason. An admitted value that
fails must turn into exit 1 and a line naming the check; two honest ways to
get one: a base override that really breaks the compiled rows, and
`--admit`, which runs a value the check refuses.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from search.commands import selftest
from conftest import made_in, pythonpath, run_search

GPU_ONLY_ON_A_CPU = ("precision=tf32", "precision=fp16", "precision=fp8", "model_pruning.method='2:4'",
                     "memory.expandable_segments=true", "framework.cudnn_benchmark=true")
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU's table; a GPU admits these values")


def rows_of(stdout: str) -> dict[str, str]:
    """value -> the result line under it, from the printed table."""
    lines = [line.strip() for line in stdout.splitlines()]
    known = {c.override for c in selftest.cases(8)}
    out = {}
    for i, line in enumerate(lines[:-1]):
        value = line.split()[0] if line.split() else ""
        if value in known and value not in out:  # a wrapped reason may name a value too ("fix: ...")
            out[value] = lines[i + 1]
    return out


@no_cuda
@pytest.mark.slow
def test_the_whole_self_test_runs_every_cpu_value_and_skips_the_gpu_ones(workdir: Path) -> None:
    done = run_search("selftest", cwd=workdir, env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = rows_of(done.stdout)
    for value in GPU_ONLY_ON_A_CPU:
        assert rows[value].startswith("skipped: ") and " needs " in rows[value], (value, rows[value])
    ran = [v for v in rows if v not in GPU_ONLY_ON_A_CPU]
    assert {"precision=fp32", "precision=bf16", "parallel.compile=default", "parallel.compile=max-autotune",
            "model_pruning.method=structured"} <= set(ran)
    for value in ran:
        assert rows[value].startswith("ok"), (value, rows[value])
    lines = done.stdout.splitlines()
    table = lines[lines.index(next(x for x in lines if x.startswith("self-test: each knob value"))):-1]
    assert len(table) > 2 * len(rows) and max(len(line) for line in table) <= 80  # the table fits 80 columns
    assert f"{len(ran)} values ran ok, 0 failed, {len(GPU_ONLY_ON_A_CPU)} skipped" in done.stdout
    assert made_in(workdir) == []  # no output directory, study or run


def test_an_admitted_value_that_fails_exits_1_and_names_the_check(workdir: Path) -> None:
    # A real failure of admitted values: every compiled row asks torch for a backend that does not exist.
    done = run_search("selftest", "--only", "parallel.compile", "parallel.compile_backend=no_such_backend",
                      cwd=workdir, env={"COLUMNS": "80"})
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    rows = rows_of(done.stdout)
    assert rows["precision=fp32"].startswith("ok")  # the base does not compile
    assert rows["parallel.compile=default"].startswith("fails: crashed:")
    line = next(x for x in done.stdout.splitlines() if x.startswith("the hardware check admitted parallel.compile"
                                                                     "=default"))
    assert "no_such_backend" in line and line.endswith(": the check in objectives/knobs/compile.py (no hardware check: admits every value) is wrong")
    assert "0 values ran ok" not in done.stdout and "3 failed" in done.stdout


@no_cuda
def test_admit_runs_a_refused_value_and_its_failure_exits_1(workdir: Path) -> None:
    done = run_search("selftest", "--only", "precision", "--admit", "precision=fp16", cwd=workdir,
                      env={"COLUMNS": "80"})
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert rows_of(done.stdout)["precision=fp16"].startswith("fails: infeasible: precision=fp16 needs a CUDA GPU")
    assert ("the hardware check admitted precision=fp16 (forced by --admit) but it failed: infeasible: "
            "precision=fp16 needs a CUDA GPU") in done.stdout
    assert "the check in objectives/knobs/precision.py (check_hardware) is wrong" in done.stdout


def test_a_failing_base_runs_nothing_else_and_says_how_to_see_why(workdir: Path) -> None:
    done = run_search("selftest", "--only", "precision", "--timeout-s", "0.5",
                      cwd=workdir, env={"COLUMNS": "80"})
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    rows = rows_of(done.stdout)
    assert rows["precision=fp32"].startswith("fails: timeout")
    assert rows["precision=bf16"].startswith("not run: the base failed")
    assert "the base configuration failed: timeout" in done.stdout
    assert "fix: python -m search run objective=digits" in done.stdout


@pytest.mark.parametrize("args, words", [
    (["precision=choice(fp32,bf16)"], "overrides must be fixed values; got precision=choice(fp32,bf16)"),
    (["precision=fp64"], "precision must be one of fp32, tf32, bf16, fp16, fp8; got 'fp64'"),
    (["no_such_key=1"], "overrides must name existing config groups"),
    (["--admit", "precision=fp64"], "--admit takes one of the self-test's values; got 'precision=fp64'"),
    (["--only", "precisions"], "--only takes a knob of the self-test; got 'precisions'"),
    (["--timeout-s", "0"], "--timeout-s must be > 0; got 0"),
])
def test_bad_input_is_one_line_and_exit_2(workdir: Path, capsys: pytest.CaptureFixture, args: list[str],
                                          words: str) -> None:
    with pytest.raises(SystemExit) as done:
        selftest.main(args)
    out, err = capsys.readouterr()
    assert done.value.code == 2, out + err
    assert words in err and "fix:" in err
    assert len(err.strip().splitlines()) == 1, err
    assert out == "" and made_in(workdir) == []  # nothing ran, nothing was made


def test_the_command_line_reaches_the_self_test(workdir: Path) -> None:
    done = run_search("selftest", "precision=choice(fp32,bf16)", cwd=workdir)
    assert done.returncode == 2 and "search: error: the self-test varies one value at a time" in done.stderr
    assert "selftest" in run_search("--help", cwd=workdir).stdout
    doctor = run_search("doctor", "--storage", str(workdir / "study.journal"), cwd=workdir)
    assert "catch a check that admits too much: python -m search selftest" in " ".join(doctor.stdout.split())


def test_plan_admits_by_the_sweeps_rule_and_needs_every_companion_value() -> None:
    from objectives import Hardware

    cpu = Hardware(cpu_cores=2, why_no_gpu="NVML: none")
    rows = {r.case.override: r for r in selftest.plan(selftest.cases(2), cpu, {"precision=fp8"},
                                                      said_once="NVML: none")}
    assert rows["precision=fp32"].is_base and rows["precision=fp32"].admitted
    assert not rows["precision=fp16"].admitted
    assert rows["precision=fp16"].skipped_why == ("precision=fp16 needs a CUDA GPU; got no usable GPU; "
                                                  "fix: precision=bf16 or precision=fp32")
    assert rows["precision=fp8"].admitted and rows["precision=fp8"].forced
    assert rows["parallel.devices=2"].admitted and "parallel.devices=3" not in rows
    assert rows["precision=fp16"].case.check == "objectives/knobs/precision.py (check_hardware)"
    # 2:4 needs bf16 as well: refused with it when bf16 is (a GPU older than Ampere)
    turing = Hardware(cpu_cores=2, gpu_count=1, compute_capability=(7, 5), cusparselt=True, torchao=True)
    two_four = {r.case.override: r for r in selftest.plan(selftest.cases(1), turing, set())}
    why = two_four["model_pruning.method='2:4'"].skipped_why
    assert "precision=bf16 needs compute capability 8.0 or later on a GPU" in why
    assert "model_pruning.method=2:4 needs a CUDA GPU with compute capability 8.0 or later" in why


def test_every_value_composes_with_its_companions_into_a_config_the_trial_accepts() -> None:
    from objectives import parse_config

    compose = selftest.compose_with(list(selftest.BASE_OVERRIDES))
    for case in selftest.cases(2):
        cfg = parse_config(compose([*case.needs, case.override]))
        assert selftest.to_override(case.knob, _get(cfg, case.knob)) == case.override
    two_four = next(c for c in selftest.cases(1) if c.value == "2:4")
    cfg = parse_config(compose([*two_four.needs, two_four.override]))
    assert (cfg.objective.name, cfg.objective.size, cfg.precision) == ("gpt", "gpt2-small", "bf16")


def _get(cfg: object, dotted: str) -> object:
    for part in dotted.split("."):
        cfg = getattr(cfg, part)
    return cfg


def test_ctrl_c_exits_130_in_one_line_and_leaves_no_process_behind(workdir: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    import psutil

    env = {**os.environ, "PYTHONPATH": pythonpath()}
    # A terminal's Ctrl-C reaches a process whose SIGINT is the default; an ignored SIGINT is inherited
    # through exec (Python then leaves it ignored), and this test must not depend on what the process
    # running it inherited or was left with by earlier tests (it failed in full-suite runs only).
    inherited = signal.getsignal(signal.SIGINT)
    proc = subprocess.Popen([sys.executable, "-m", "search", "selftest", "--only", "parallel.compile"], cwd=workdir,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stderr is not None
    for line in proc.stderr:  # the base row has run: a compiling row (many seconds) is running now
        if line.startswith("selftest: precision=fp32"):
            break
    tree = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGINT)
    rest = proc.stderr.read()
    assert proc.wait(timeout=60) == 130, f"{rest} (this process's SIGINT: {inherited})"
    assert rest.strip().splitlines()[-1] == "search: selftest interrupted by Ctrl-C"
    gone, alive = psutil.wait_procs(tree, timeout=10)
    assert not alive
