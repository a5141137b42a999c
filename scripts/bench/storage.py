"""Study storage benchmarks (issue 8): Optuna ask+tell latency as a study
grows, and trial bookkeeping throughput with several workers on PostgreSQL.

    python scripts/bench/storage.py latency    [--quick] [--postgres-url URL] [--sampler random|gp|tpe]
                                               [--sizes N ...] [--samples N]
    python scripts/bench/storage.py throughput [--quick] [--postgres-url URL] [--sampler random|gp|tpe]

latency: one ask+tell, timed, over the default search space
(conf/search/default.yaml, seven categorical knobs, two objectives), at 100,
1,000 and 5,000 completed trials, on the default journal file and on
PostgreSQL; p50 and p95 over --samples ask+tells at each size. --sampler
picks the sampler: `random` (the default here) times the storage alone;
`gp` (the sweep's default) and `tpe` (hydra/sweeper/sampler=tpe) add what
the sampler computes from every trial so far.
throughput: 1, 2, 4 and 8 worker processes on one PostgreSQL study, each
asking (with --sampler), "training" with a trivial objective and telling for
20 s (4 s with --quick); trials per second in total.

Without --postgres-url a throwaway PostgreSQL cluster is started with the
tests' helper (tests/servers.py: initdb + pg_ctl on loopback) and removed
after. --quick: smaller sizes and shorter runs, well under a minute.
The load average (`uptime`) is printed with every figure: on a shared
machine, figures taken under load are not trustworthy.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

import optuna
import yaml
from optuna.distributions import CategoricalDistribution
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState, create_trial

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchdoc import load_averages, machine_line  # noqa: E402

DIRECTIONS = ["maximize", "maximize"]


def space() -> dict[str, CategoricalDistribution]:
    """The default search space's knobs as Optuna distributions."""
    params = yaml.safe_load((REPO / "conf" / "search" / "default.yaml").read_text())["params"]
    return {key: CategoricalDistribution(yaml.safe_load(f"[{spec[len('choice('):-1]}]"))
            for key, spec in params.items()}


@contextmanager
def postgres(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    sys.path.insert(0, str(REPO / "tests"))
    from servers import Postgres, postgres_available

    if not postgres_available():
        raise SystemExit("no PostgreSQL server binaries here: pass --postgres-url postgresql://...")
    with Postgres.throwaway("bench", "bench-pw") as pg:
        pg.create_database("bench")
        yield pg.url("bench")


def open_storage(kind: str, target: str):
    return JournalStorage(JournalFileBackend(target)) if kind == "journal" else optuna.storages.RDBStorage(target)


def grow(study: optuna.Study, dists: dict, count: int, seed: int) -> None:
    """Add completed trials (random configurations, plausible values) until the study has `count`."""
    rng = random.Random(seed)
    missing = count - len(study.get_trials(deepcopy=False))
    trials = []
    for _ in range(missing):
        params = {k: rng.choice(d.choices) for k, d in dists.items()}
        trials.append(create_trial(params=params, distributions=dists, values=[rng.uniform(100, 2000), rng.random()],
                                   state=TrialState.COMPLETE))
    for i in range(0, len(trials), 500):
        study.add_trials(trials[i:i + 500])


def make_sampler(name: str, seed: int | None) -> optuna.samplers.BaseSampler:
    """The sampler as the sweep configures it (hydra_plugins/search_sweeper)."""
    from hydra.utils import get_class
    from hydra_plugins.search_sweeper.search_sweeper import _SAMPLER_ARGS, _SAMPLERS

    return get_class(_SAMPLERS[name])(seed=seed, **_SAMPLER_ARGS.get(name, {}))


def latency(kind: str, target: str, sizes: list[int], samples: int, sampler: str) -> list[dict]:
    dists = space()
    storage = open_storage(kind, target)
    study = optuna.create_study(study_name=f"latency-{kind}-{sampler}", storage=storage, directions=DIRECTIONS,
                                sampler=make_sampler(sampler, seed=0))
    rows = []
    for size in sizes:
        grow(study, dists, size, seed=size)
        study.tell(study.ask(dists), [1000.0, 0.9])  # untimed: the first ask after growing reads the new trials
        times = []
        for _ in range(samples):
            started = time.perf_counter()
            trial = study.ask(dists)
            study.tell(trial, [1000.0, 0.9])
            times.append(time.perf_counter() - started)
        q = statistics.quantiles(times, n=20)
        rows.append({"storage": kind, "trials": size, "p50_ms": 1000 * statistics.median(times),
                     "p95_ms": 1000 * q[18], "samples": samples, "load": load_averages()})
        print(f"{kind:9s} {sampler:6s} {size:5d} trials: ask+tell p50 {rows[-1]['p50_ms']:7.1f} ms  "
              f"p95 {rows[-1]['p95_ms']:7.1f} ms  ({samples} samples; load {rows[-1]['load']})", flush=True)
    return rows


def _worker(url: str, study_name: str, sampler: str, seconds: float, ready: "mp.Queue", go: "mp.Event",
            counts: "mp.Queue") -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = space()
    study = optuna.load_study(study_name=study_name, storage=url, sampler=make_sampler(sampler, seed=None))
    study.tell(study.ask(dists), [1.0, 0.5])  # untimed: connections open, trials cached
    ready.put(os.getpid())
    go.wait()
    done, stop_at = 0, time.perf_counter() + seconds
    while time.perf_counter() < stop_at:
        trial = study.ask(dists)
        study.tell(trial, [float(trial.params["batch_size"]), 0.5])  # the trivial objective
        done += 1
    counts.put(done)


def throughput(url: str, workers_list: list[int], seconds: float, seed_trials: int, sampler: str) -> list[dict]:
    ctx = mp.get_context("spawn")
    rows = []
    for workers in workers_list:
        name = f"throughput-{workers}-{int(time.time())}"
        study = optuna.create_study(study_name=name, storage=url, directions=DIRECTIONS)
        grow(study, space(), seed_trials, seed=workers)
        ready, counts, go = ctx.Queue(), ctx.Queue(), ctx.Event()
        procs = [ctx.Process(target=_worker, args=(url, name, sampler, seconds, ready, go, counts))
                 for _ in range(workers)]
        for p in procs:
            p.start()
        for _ in procs:
            ready.get(timeout=600)
        go.set()  # every worker has loaded the study: the clock starts for all at once
        done = sum(counts.get(timeout=600) for _ in procs)
        for p in procs:
            p.join()
        rows.append({"workers": workers, "trials": done, "trials_per_s": done / seconds, "seconds": seconds,
                     "load": load_averages()})
        print(f"{workers} workers: {done} trials in {seconds:g} s = {done / seconds:6.1f} trials/s "
              f"(study started at {seed_trials} trials; load {rows[-1]['load']})", flush=True)
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["latency", "throughput", "all"])
    parser.add_argument("--quick", action="store_true", help="small sizes, short runs: well under a minute")
    parser.add_argument("--postgres-url", help="an existing database (default: a throwaway local cluster)")
    parser.add_argument("--sampler", choices=["random", "gp", "tpe"], default="random",
                        help="latency: random times the storage alone; gp is the sweep's default")
    parser.add_argument("--sizes", type=int, nargs="+", help="latency: study sizes (default 100 1000 5000)")
    parser.add_argument("--samples", type=int, help="latency: timed ask+tells per size (default 40)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: the throwaway PostgreSQL is stopped
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    print(f"machine: {machine_line()}, optuna {optuna.__version__}; {time.strftime('%Y-%m-%d %H:%M')}; "
          f"load before: {load_averages()}", flush=True)
    with ExitStack() as stack:
        url = stack.enter_context(postgres(args.postgres_url))
        if args.what in ("latency", "all"):
            sizes, samples = ([100, 300], 10) if args.quick else ([100, 1000, 5000], 40)
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="search-bench-"))
            sizes, samples = args.sizes or sizes, args.samples or samples
            latency("journal", str(Path(tmp) / "bench.journal"), sizes, samples, args.sampler)
            latency("postgresql", url, sizes, samples, args.sampler)
        if args.what in ("throughput", "all"):
            workers, seconds = ([1, 2], 4.0) if args.quick else ([1, 2, 4, 8], 20.0)
            throughput(url, workers, seconds, seed_trials=100, sampler=args.sampler)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
