"""The GP sampler's ask on torch's default intra-op threads against one thread.

Optuna's GPSampler limits torch to one thread for its kernel fit and its
acquisition's optimisation (optuna/_gp/thread_limiting.py), not for the rest
of an ask; the sweep asks on one thread throughout
(search/sweep/gp_view.py `one_torch_thread`). This times one ask of a
GPSampler on a study of N random trials of the default space as the GP
sees it (conf/search/default.yaml's seven knobs; two objectives, or one with a constraint as the
answer's view shows it), the two arms alternating ask by ask so that drift hits both, with
`--busy K` processes spinning beside it the way device slots' trials keep
cores busy while the sweep asks. Wall and CPU seconds are the asking
process's own (every thread of it).

    python scripts/bench/gp_threads.py                  # 12 and 20 trials, idle and busy -> docs/BENCHMARKS.md by hand
    python scripts/bench/gp_threads.py --quick          # 11 trials, 1 ask per arm, idle, a few seconds
"""
from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import optuna  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from search.sweep.gp_view import _ranked, one_torch_thread  # noqa: E402
from search.sweep.space import build_space  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def gp_space() -> dict[str, optuna.distributions.BaseDistribution]:
    """conf/search/default.yaml's knobs as the GP is shown them (search/sweep/gp_view.py): numeric choices as
    their ranks, the others as categories."""
    params = OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "search" / "default.yaml").params)
    return {name: optuna.distributions.IntDistribution(0, len(ranks) - 1) if (ranks := _ranked(d)) is not None else d
            for name, d in build_space(params, []).distributions.items()}


SPACE = gp_space()
ARMS = {"torch's default threads": contextlib.nullcontext, "one thread (the sweep's)": one_torch_thread}


def _spin() -> None:
    while True:
        pass


def study_of(trials: int, constrained: bool) -> optuna.Study:
    rng = random.Random(0)
    study = optuna.create_study(directions=["maximize"] if constrained else ["maximize", "maximize"],
                                sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(trials):
        trial = study.ask(SPACE)
        if constrained:
            trial.set_constraint("accuracy_floor", rng.random() - 0.5)  # the view's floor - val_accuracy
        study.tell(trial, [rng.random() * 1000] if constrained else [rng.random() * 1000, 0.9 + 0.05 * rng.random()])
    return study


def time_asks(study: optuna.Study, asks: int) -> dict[str, tuple[float, float]]:
    """Median wall and CPU seconds of one ask in each arm."""
    wall: dict[str, list[float]] = {arm: [] for arm in ARMS}
    cpu: dict[str, list[float]] = {arm: [] for arm in ARMS}
    study.sampler = optuna.samplers.GPSampler(seed=0)
    study.tell(study.ask(SPACE), state=optuna.trial.TrialState.FAIL)  # untimed: the first ask imports scipy's parts
    for i in range(asks):
        for arm, limit in ARMS.items():
            study.sampler = optuna.samplers.GPSampler(seed=i)
            w, c = time.perf_counter(), time.process_time()
            with limit():
                trial = study.ask(SPACE)
            wall[arm].append(time.perf_counter() - w)
            cpu[arm].append(time.process_time() - c)
            study.tell(trial, state=optuna.trial.TrialState.FAIL)  # not a trial the next ask fits
    return {arm: (statistics.median(wall[arm]), statistics.median(cpu[arm])) for arm in ARMS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--trials", default="12,20", help="the study's trials before the timed ask, comma-separated")
    parser.add_argument("--asks", type=int, default=7, help="asks per arm")
    parser.add_argument("--busy", default=f"0,{os.cpu_count()}", help="spinning processes beside the asks")
    args = parser.parse_args()
    if args.quick:
        args.trials, args.asks, args.busy = "11", 1, "0"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    print(f"{os.cpu_count()} cores; torch {torch.__version__}, {torch.get_num_threads()} intra-op threads by default; "
          f"optuna {optuna.__version__}")
    print("| trials | objectives | busy processes | " + " | ".join(f"{arm}: wall s / CPU s" for arm in ARMS) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in ARMS) + " |")
    for busy in map(int, args.busy.split(",")):
        spinners = [mp.get_context("spawn").Process(target=_spin, daemon=True) for _ in range(busy)]
        for proc in spinners:
            proc.start()
        try:
            for trials in map(int, args.trials.split(",")):
                for constrained in (False, True):
                    times = time_asks(study_of(trials, constrained), args.asks)
                    shape = "1 and a constraint" if constrained else "2"
                    print(f"| {trials} | {shape} | {busy} | "
                          + " | ".join(f"{w:.3f} / {c:.3f}" for w, c in times.values()) + " |", flush=True)
        finally:
            for proc in spinners:
                proc.kill()


if __name__ == "__main__":
    main()
