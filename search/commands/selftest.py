"""`python -m search selftest`: the first command to run on new hardware.

The hardware checks (each knob's own, objectives/knobs/: the same ones that
remove values from a sweep's space, list them in doctor and refuse them in a
trial) say which knob values this machine can run; the
self-test runs each of them for a few steps, so that a check that admits
what then fails is found in a minute, not as failed trials of a night's
sweep. Each value is varied alone from a small fixed base (`BASE_OVERRIDES`
on the digits workload, plus the user's overrides) and runs as an isolated
trial (search/trial/isolate.py: a fresh child, a timeout), the path of every
sweep trial, so a crash in one row ends that row only. Values the check
refuses are listed as skipped with its reason.

A few values need company to mean anything: fp8 runs on the tiny gpt with
`parallel.compile=default` (digits' only Linear, its 10-class head, is too
narrow to convert, and fp8 needs compile); `2:4` model pruning at ratio 0.5
in bf16 on gpt2-small at batch 8 (2:4 swaps only Linear layers with both
dimensions multiples of 128 outside the first and last blocks: digits and
the tiny gpt have none).

Exit status 0 when every admitted value ran, 1 when one failed (each such
value gets the line "the hardware check admitted X=Y but it failed: ...:
the check in <module> is wrong"), 2 for bad input, 130 for Ctrl-C.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from search.errors import EXIT_SELFTEST_FAILED, BadInput, exit_bad_input
from search.sweep.space import parse_overrides, to_override

BASE_OVERRIDES = ("objective=digits", "batch_size=32", "train.budget_samples=256", "train.warmup_steps=1",
                  "train.window_steps=2", "train.eval_batch_size=512")
DEFAULT_TIMEOUT_S = 300.0  # per value; as for every trial, torch.compile time is not counted (trial.compile_timeout_s)
_GPT = ("objective=gpt",)
_GPT2_SMALL = ("objective=gpt", "objective.size=gpt2-small", "batch_size=8", "objective.val_batches=1",
               "train.eval_batch_size=8")


@dataclass(frozen=True)
class Case:
    """One row: a knob value, what it needs besides itself, and where its hardware check lives."""

    knob: str
    value: Any
    needs: tuple[str, ...] = ()
    check: str = ""  # the module whose hardware check admits or refuses the value

    @property
    def override(self) -> str:
        return to_override(self.knob, self.value)


@dataclass
class Row:
    case: Case
    admitted: bool
    forced: bool = False  # admitted by --admit, against the hardware check
    skipped_why: str = ""
    outcome: str = ""  # "" until run; "not run" when the base failed
    reason: str = ""
    samples_per_s: float | None = None
    peak_mem_bytes: float | None = None
    wall_s: float = 0.0
    not_applied: str = ""
    is_base: bool = False  # the base configuration (the first row): if it fails, nothing else runs

    @property
    def failed(self) -> bool:
        return self.admitted and self.outcome not in ("", "ok", "not run")


def cases(max_devices: int) -> list[Case]:
    """Every value of the knobs with a GPU path, the base (fp32, one device) first."""
    from objectives.config import COMPILE_MODES, PRECISIONS

    def case(knob: str, value: Any, needs: tuple[str, ...] = ()) -> Case:
        return Case(knob, value, needs, check_of(knob))

    out = [case("precision", p, (*_GPT, "parallel.compile=default") if p == "fp8" else ()) for p in PRECISIONS]
    out += [case("parallel.devices", n) for n in range(2, max_devices + 1)]
    out += [case("parallel.compile", mode) for mode in COMPILE_MODES[1:]]
    out += [case("parallel.grad_accum", 2)]
    out += [case("model_pruning.method", m, ("model_pruning.ratio=0.5",)) for m in ("structured", "unstructured")]
    out += [case("model_pruning.method", "2:4", ("model_pruning.ratio=0.5", "precision=bf16", *_GPT2_SMALL))]
    out += [case("memory.activation_checkpointing", True), case("memory.expandable_segments", True),
            case("framework.channels_last", True), case("framework.cudnn_benchmark", True),
            case("loader.num_workers", 1), case("loader.pin_memory", True), case("loader.augment_on_device", True),
            case("optim.fused", True)]
    return out


def check_of(key: str) -> str:
    """Where the hardware check of ``key`` lives: its knob's module (objectives/knobs/), or that it has none."""
    import types

    import objectives.knobs as knobs

    modules = [m for m in vars(knobs).values() if isinstance(m, types.ModuleType) and hasattr(m, "KNOB")]
    owner = next((m for m in modules if key in m.KNOB.rules), None) or \
        next((m for m in modules if m.KNOB.config is not None and key.split(".")[0] == m.KNOB.section), None)
    if owner is None:
        return "no knob module"
    path = owner.__name__.replace(".", "/") + ".py"
    return f"{path} (check_hardware)" if owner.KNOB.check_hardware else f"{path} (no hardware check: admits every value)"


def plan(all_cases: list[Case], hardware: Any, forced: set[str], said_once: str = "") -> list[Row]:
    """Admit or skip each case by the knobs' own hardware checks (objectives/knobs/, the ones the sweep and
    the trial run) on ``hardware`` (objectives.hardware.Hardware), the value with what it needs;
    `said_once` (why there is no GPU, printed above the table) is left out of each reason."""
    from objectives.config import TrialConfig, with_values
    from objectives.config_check import HardwareError
    from objectives.knobs import broken_rules

    rows = []
    for case in all_cases:
        params = {o.get_key_element(): o.value() for o in parse_overrides([*case.needs, case.override])}
        refused = [str(e) for e in broken_rules(with_values(TrialConfig(), params), hardware)
                   if isinstance(e, HardwareError)]
        why = "; ".join(dict.fromkeys(refused))
        if said_once:
            why = why.replace(f" ({said_once})", "")
        force = case.override in forced
        rows.append(Row(case, admitted=not why or force, forced=bool(why) and force, skipped_why=why,
                        is_base=not rows))
    return rows


def run_rows(rows: list[Row], compose: Callable[[list[str]], dict], timeout_s: float,
             progress: Callable[[Row], None]) -> None:
    """Run the admitted rows in order, each in its own isolated trial; the base row first."""
    from search.trial.isolate import run_isolated

    base_failed = ""
    for row in rows:
        if not row.admitted:
            continue
        if base_failed:
            row.outcome, row.reason = "not run", f"the base configuration failed ({base_failed})"
            progress(row)
            continue
        started = time.perf_counter()
        result = run_isolated(compose([*row.case.needs, row.case.override]), timeout_s=timeout_s)
        row.wall_s = time.perf_counter() - started
        metrics, info = result.get("metrics", {}), result.get("info", {})
        row.outcome, row.reason = str(result.get("outcome")), " ".join(str(result.get("reason", "")).split())
        row.samples_per_s = metrics.get("throughput_samples_per_s")
        row.peak_mem_bytes = metrics.get("cuda_peak_allocated_bytes", metrics.get("peak_pss_tree_bytes"))
        row.not_applied = str(info.get("knobs_not_applied", ""))
        progress(row)
        if row.is_base and row.outcome != "ok":
            base_failed = f"{row.case.override}: {row.outcome}: {row.reason}"


def failure_line(row: Row, base: list[str]) -> str:
    if row.is_base:
        return (f"the base configuration failed: {row.outcome}: {row.reason}; every other value varies it, so none "
                f"ran; fix: python -m search run {' '.join(base)} shows why")
    forced = " (forced by --admit)" if row.forced else ""
    refused = " (the trial's own check refused it)" if row.outcome == "infeasible" else ""
    return (f"the hardware check admitted {row.case.override}{forced} but it failed: {row.outcome}: {row.reason}"
            f"{refused}: the check in {row.case.check} is wrong")


def result_text(row: Row) -> str:
    if not row.admitted:
        return f"skipped: {row.skipped_why}"
    if row.outcome == "ok":
        return "ok" + (f"; not applied: {row.not_applied}" if row.not_applied else "")
    if row.outcome == "not run":
        return "not run: the base failed"
    return f"fails: {row.outcome}: {row.reason}"


def table(rows: list[Row]) -> Any:
    """One row per value: the override and, under it, its result; the figures on the right (fits 80 columns)."""
    from rich import box
    from rich.console import Group
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    out = Table(title="self-test: each knob value for a few steps", title_justify="left", box=box.SIMPLE_HEAD,
                pad_edge=False)
    out.add_column("value / result", ratio=1)
    out.add_column("samples/s", justify="right", no_wrap=True)
    out.add_column("peak MiB", justify="right", no_wrap=True)
    styles = {"ok": "green", "skipped": "dim", "fails": "bold red"}
    for row in rows:
        rate = "-" if row.samples_per_s is None else f"{row.samples_per_s:,.0f}"
        peak = "-" if row.peak_mem_bytes is None else f"{row.peak_mem_bytes / 2**20:,.0f}"
        result = result_text(row)
        style = styles.get(result.split(":")[0].split(";")[0], "")
        out.add_row(Group(Text(row.case.override), Padding(Text(result, style), (0, 0, 0, 2))), rate, peak)
    return out


def compose_with(base: list[str]) -> Callable[[list[str]], dict]:
    """The trial config a sweep would hand this value: conf/ composed with the base, then the row's overrides."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from search.paths import conf_dir

    def composed(extra: list[str]) -> dict:
        with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
            cfg = compose("config", overrides=[*base, *extra])
        return OmegaConf.to_container(cfg, resolve=True)

    return composed


def check_arguments(args: argparse.Namespace, known: list[Case]) -> list[str]:
    """Every bad input as one line before anything runs; returns the base overrides."""
    from objectives import ConfigError, parse_config
    from search.commands.precheck import check_command_line

    sweeps = [o.input_line for o in parse_overrides(args.overrides) if o.is_sweep_override()]
    if sweeps:
        raise BadInput(f"the self-test varies one value at a time itself, so overrides must be fixed values; got "
                       f"{sweeps[0]}; fix: drop it, or run python -m search multirun for a sweep")
    if args.timeout_s <= 0:
        raise BadInput(f"--timeout-s must be > 0; got {args.timeout_s:g}; fix: --timeout-s {DEFAULT_TIMEOUT_S:g}")
    names = {c.override for c in known}
    for line in args.admit:
        if line not in names:
            raise BadInput(f"--admit takes one of the self-test's values; got {line!r}; "
                           f"fix: one of {', '.join(sorted(names))}")
    knobs = {c.knob for c in known}
    for knob in args.only:
        if knob not in knobs:
            raise BadInput(f"--only takes a knob of the self-test; got {knob!r}; fix: one of {', '.join(sorted(knobs))}")
    base = [*BASE_OVERRIDES, *args.overrides]
    check_command_line(base)
    try:
        parse_config(compose_with(base)([]))
    except ConfigError as err:
        raise BadInput(str(err)) from None
    return base


def main(argv: list[str]) -> int:
    """Exit status 0, 1 (an admitted value failed), 2 (bad input) or 130 (Ctrl-C: the running row's
    process tree is killed on the way out)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("search: selftest interrupted by Ctrl-C", file=sys.stderr, flush=True)
        return 130


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m search selftest", description=__doc__.split("\n\n")[0])
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the base configuration")
    parser.add_argument("--timeout-s", type=float, default=DEFAULT_TIMEOUT_S, help="per value (default %(default)g)")
    parser.add_argument("--only", action="append", default=[], metavar="KNOB",
                        help="run only this knob's values (repeatable); the base row always runs")
    parser.add_argument("--admit", action="append", default=[], metavar="KNOB=VALUE",
                        help="run a value the hardware check refuses, as if it admitted it (repeatable): "
                             "to find out whether the check is too strict")
    args = parser.parse_args(argv)

    from search.measure.machine import machine_hardware, runnable_knob_values

    started = time.perf_counter()
    found = machine_hardware()
    known = cases(max(runnable_knob_values(found)["parallel.devices"]))
    try:
        base = check_arguments(args, known)
    except BadInput as err:
        exit_bad_input(err)
    chosen = [c for i, c in enumerate(known) if i == 0 or not args.only or c.knob in args.only]
    rows = plan(chosen, found, set(args.admit), found.why_no_gpu)
    where = (f"{found.gpu_count} GPU(s), lowest {found.shown_capability()}" if found.gpu_count
             else f"no usable GPU ({found.why_no_gpu}): the CPU values")
    print(f"selftest: {where}; base: {' '.join(base)}", flush=True)
    return report(rows, base, started, lambda: run_rows(rows, compose_with(base), args.timeout_s, _progress))


def report(rows: list[Row], base: list[str], started: float, run: Callable[[], None]) -> int:
    from rich.console import Console

    run()
    Console(highlight=False).print(table(rows))
    failed = [r for r in rows if r.failed]
    for row in failed:
        print(failure_line(row, base), flush=True)
    ran = sum(1 for r in rows if r.outcome == "ok")
    skipped = sum(1 for r in rows if not r.admitted)
    print(f"selftest: {ran} values ran ok, {len(failed)} failed, {skipped} skipped by the hardware check, in "
          f"{time.perf_counter() - started:.0f} s", flush=True)
    if not failed:
        from search.commands.gpu_default import what_multirun_runs

        print(f"selftest: next, {what_multirun_runs()}", flush=True)
    return EXIT_SELFTEST_FAILED if failed else 0


def _progress(row: Row) -> None:
    print(f"selftest: {row.case.override}: {row.outcome} ({row.wall_s:.1f} s)", file=sys.stderr, flush=True)
