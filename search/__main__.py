"""`python -m search multirun [overrides]`: a sweep (Hydra --multirun).
`python -m search run [overrides]`: one trial at a fixed configuration;
`python -m search run --from best.yaml [overrides]`: at the one `export` wrote (the command line wins).
`python -m search doctor`: what this machine can run and whether storage and MLflow answer.
`python -m search selftest [overrides]`: each knob value this machine admits, run for a few steps.
`python -m search nightly [overrides]`: the nightly sweep (conf/nightly.yaml).
`python -m search report` / `export`: a study's plots; its chosen configuration as overrides.

Overrides are Hydra's (`batch_size=choice(32,64)`, `train.budget_samples=3000`,
`hydra.sweeper.n_trials=4`). A malformed one is reported in one line with
exit status 2 before Hydra starts.
"""
from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from argparse import Namespace

    from search.commands.gpu_default import GpuFacts

USAGE = """usage: python -m search {multirun,run,nightly} [hydra overrides ...]
       python -m search run --from FILE [hydra overrides ...]
       python -m search doctor [--storage URL_OR_PATH]
       python -m search selftest [--only KNOB] [--timeout-s S] [hydra overrides ...]
       python -m search {report,export} [--storage URL_OR_PATH] [--study-name NAME] [--help]

  multirun   sweep the search space (conf/search/) with Optuna, log to MLflow
  run        run one trial at the configuration given by the overrides (--from: the overrides
             of a file written by export, then those on the command line)
  doctor     hardware, versions, runnable knob values, storage and MLflow reachability
  selftest   run each knob value the hardware check admits for a few steps, in isolated trials
             (exit 1 when an admitted value fails: the check is wrong); on a GPU, run it first
  nightly    the nightly sweep: warm start, incumbent re-measured, regression test, report
             (exit 0 fine, 4 regression, 5 could not run)
  report     a study's Pareto front, plots (PNG, HTML) on disk and in MLflow
  export     the configuration a rule picks, as a YAML file of Hydra overrides

Examples:
  python -m search multirun hydra.sweeper.n_trials=4 train.budget_samples=3000
  python -m search multirun 'batch_size=choice(64,128)' precision=bf16
  python -m search run batch_size=128 loader.num_workers=2
Hydra's own flags work too: python -m search multirun --cfg job (the baseline's config; --cfg hydra
shows the space under hydra.sweeper.params), python -m search multirun --info defaults"""

COMMANDS = {"multirun": ["--multirun"], "run": [], "nightly": ["--multirun", "--config-name", "nightly"],
            "doctor": [], "selftest": [], "report": [], "export": []}


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        raise SystemExit(0 if argv else 2)
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"search: error: the command must be one of {', '.join(COMMANDS)}; got {command!r}; "
              f"fix: python -m search multirun", file=sys.stderr)
        raise SystemExit(2)

    if command == "doctor":
        from search.commands.doctor import main as doctor

        raise SystemExit(doctor(rest))
    if command == "selftest":
        from search.commands.selftest import main as selftest

        raise SystemExit(selftest(rest))
    if command in ("report", "export"):
        from importlib import import_module

        raise SystemExit(import_module(f"search.commands.{command}").main(rest))
    if command == "nightly":
        from search.errors import nightly_status

        raise SystemExit(nightly_status(lambda: run_hydra(command, rest)))
    run_hydra(command, rest)


def run_hydra(command: str, rest: list[str]) -> None:
    from search.errors import BadInput, Interrupted, exit_bad_input
    from search.measure.nvml import pin_cuda_device_order
    from search.sweep import interrupt

    try:
        pin_cuda_device_order()  # before Hydra, the forkserver or any trial: children inherit it
        if "--multirun" in COMMANDS[command] and trials_run_here(rest):
            from search.trial.isolate import warm_up

            warm_up()  # the trials' forkserver imports torch while the command line is checked, Hydra composes
            # and the sweeper sets up; stopped at the exit when the check refuses the command line
        rest = hydra_arguments(command, rest)
    except BadInput as err:
        exit_bad_input(err)

    import hydra

    from search.paths import conf_dir
    from search.trial.app import task

    interrupt.install()  # SIGINT, SIGTERM: one clean, bounded stop, whatever follows
    sys.argv = [sys.argv[0], *hydra_flags(command, rest), *rest]
    try:
        hydra.main(config_path=str(conf_dir()), config_name="config", version_base="1.3")(task)()
    except (KeyboardInterrupt, Interrupted) as err:  # what it stopped, the sweep printed trial by trial
        interrupt.ignore_from_now()
        later = interrupt.ignored()
        also = (f"; {len(later)} later signal(s) ({', '.join(sorted({s.name for s in map(signal.Signals, later)}))}) "
                f"ignored so that the cleanup could finish" if later else "")
        then = "the trial was not measured" if command == "run" else "run the same command again to resume"
        print(f"search: {str(err) or 'interrupted by SIGINT (Ctrl-C)'}{also}; {then}", file=sys.stderr, flush=True)
        raise SystemExit(getattr(err, "exit_status", 130)) from None
    # Done: the answer, the runs and the report are written. A signal in the second of exit left would only
    # turn a finished command into a traceback and exit status 1 (a pass's SIGTERM just after the panel).
    interrupt.ignore_from_now()


def hydra_arguments(command: str, rest: list[str], gpu_facts: GpuFacts | None = None) -> list[str]:
    """The command line Hydra gets, checked: `--from` files expanded, and on a GPU machine the GPU
    default added before the check, so that keys only its objective has (objective.size=...,
    objective.val_batches=...) are checked against the config the sweep will compose."""
    from search.commands.gpu_default import gpu_default
    from search.commands.precheck import check_command_line

    if command == "run":
        rest = exported_overrides(rest)
    if command == "multirun":
        rest = [*rest, *gpu_default(rest, gpu_facts)]  # a GPU and no objective=/search=: measure the GPU
    rest = check_command_line(rest, one_trial=command == "run")
    if "--multirun" in COMMANDS[command] and shows_configuration(rest):
        rest = sweeps_as_params(rest)  # Hydra composes no sweep outside --multirun; the space shows them
    return rest


def shows_configuration(rest: list[str]) -> bool:
    """--cfg, --info or --shell-completion: Hydra shows a configuration, which it refuses with --multirun."""
    from hydra._internal.utils import get_args_parser

    return _shows(get_args_parser().parse_args(rest))


def _shows(parsed: Namespace) -> bool:
    """Hydra's parsed command line asks it to show a configuration."""
    return bool(parsed.cfg or parsed.info or parsed.shell_completion)


def trials_run_here(rest: list[str]) -> bool:
    """Whether a sweep's trials will be forked in this process, as far as the command line tells: not when it
    asks Hydra to show something, names another launcher (its trials run in that launcher's processes) or
    another config (which may); not when the command line does not parse either (its check says why). Then the
    forkserver starts before the command line is checked and Hydra composes the sweep's config: 0.25 s after the
    process started, against 1.04 s when it started after the check (timers in one sweep, 2 cores), and later
    still from the Hydra callback (search/trial/app.py WarmUp), which starts it when this did not."""
    import argparse

    from hydra._internal.utils import get_args_parser

    parser = get_args_parser()
    parser.exit_on_error = False
    try:
        parsed = parser.parse_known_args(rest)[0]
    except argparse.ArgumentError:  # the command line's check says what is wrong with it
        return False
    if _shows(parsed) or parsed.help or parsed.hydra_help or parsed.config_dir or parsed.config_path \
            or parsed.config_name or parsed.experimental_rerun:
        return False
    return not any(o.lstrip("+~").startswith(("hydra/launcher", "hydra.launcher")) for o in parsed.overrides)


def hydra_flags(command: str, rest: list[str]) -> list[str]:
    """The command's own Hydra flags, without --multirun when the command line asks to be shown a
    configuration: `multirun --cfg job` shows the configuration the baseline composes, not a traceback."""
    flags = COMMANDS[command]
    return [f for f in flags if f != "--multirun"] if "--multirun" in flags and shows_configuration(rest) else flags


def sweeps_as_params(rest: list[str]) -> list[str]:
    """`batch_size=choice(32,64)` as the space entry it stands for (`hydra.sweeper.params.batch_size`),
    so that a shown configuration has it where the sweep reads it and Hydra composes without --multirun."""
    from hydra._internal.utils import get_args_parser

    from search.commands.precheck import PARAMS_PREFIX, quote_params_sweep
    from search.sweep.space import parse_overrides

    sweeps = {o.input_line for o in parse_overrides(get_args_parser().parse_args(rest).overrides)
              if o.is_sweep_override() and not o.is_hydra_override()}
    return [quote_params_sweep(PARAMS_PREFIX + a.lstrip("+")) if a in sweeps else a for a in rest]


def exported_overrides(rest: list[str]) -> list[str]:
    """`--from FILE` (or `--from=FILE`) replaced by the overrides that `export` wrote to FILE, placed
    first so that the command line's own overrides win."""
    from pathlib import Path

    from search.commands.export import read_overrides
    from search.errors import BadInput

    files, kept, args = [], [], iter(rest)
    for arg in args:
        if arg == "--from":
            path = next(args, None)
            if path is None:
                raise BadInput("--from needs a file; got nothing after it; fix: python -m search run --from best.yaml")
            files.append(path)
        elif arg.startswith("--from="):
            files.append(arg.partition("=")[2])
        else:
            kept.append(arg)
    return [line for path in files for line in read_overrides(Path(path))] + kept


if __name__ == "__main__":
    from search.leave import leave, take_the_exit

    take_the_exit()
    try:
        main()
    except SystemExit as done:
        leave(done.code)
    leave(0)
