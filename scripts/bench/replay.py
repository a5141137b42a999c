"""One search replayed on a measured grid: the sweep's own engine, a table lookup instead of training.

The search is built by search/sweep/build.py from the sweep's settings
(SearchSweeperConf's defaults, a strategy's overrides on top), exactly as
the sweeper builds it; only the trial's run differs: its result is the
grid's cell, with the trial's instructions applied as the trial applies
them (a throughput-only run's cost, early stopping's probe). A run is one
sweep of `n_trials`; a run that has not reached the target by then goes
on as the same command run again would (the study resumed, the start's
moves that had no room first), until `max_trials`.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from grids import Table, baseline_of, key_of, stopped_result, timed_only_cost, train_settings

OPTIMISED_METRICS = ["throughput_samples_per_s", "val_accuracy"]
DIRECTIONS = ["maximize", "maximize"]
HV_AT = 10
RANDOM = "optuna.samplers.RandomSampler"


@dataclass(frozen=True)
class Strategy:
    sampler: dict | None = None  # a `hydra/sweeper/sampler` node; None: the sweeper's default
    settings: dict = field(default_factory=dict)  # hydra.sweeper.* settings on top of the defaults
    hydra_order: bool = False  # Hydra's BasicSweeper: the product, last knob fastest


GP = "optuna.samplers.GPSampler"
STRATEGIES: dict[str, Strategy] = {
    "default": Strategy(),
    "random": Strategy({"_target_": RANDOM}),
    "hydra grid order": Strategy(hydra_order=True),
    "no patience (every trial of n_trials)": Strategy(settings={"patience_trials": None}),
    "no early stopping": Strategy(settings={"early_stopping": False}),
    "no staging": Strategy(settings={"staging": False}),
    "start moves not combined": Strategy(settings={"start_combination": False}),
    "start design = sampler (the GP's random start-up)": Strategy(settings={"start_design": "sampler"}),
    "search_for=front": Strategy(settings={"search_for": "front"}),
    "tpe multivariate, 5 startup": Strategy({"_target_": "optuna.samplers.TPESampler", "multivariate": True,
                                             "n_startup_trials": 5}),
}


def default_sampler_node() -> dict:
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    from hydra_plugins.search_sweeper.search_sweeper import SearchSweeperConf  # also registers the sampler nodes

    default = next(d["sampler"] for d in SearchSweeperConf().defaults if isinstance(d, dict))
    stored = ConfigStore.instance().load(f"hydra/sweeper/sampler/{default}.yaml").node
    return OmegaConf.to_container(stored, resolve=True)


def settings_of(strategy: Strategy, seed: int, n_trials: int) -> Any:
    """The sweep's settings as the strategy's sweep would run with them: SearchSweeperConf's defaults, the
    strategy's on top, the sampler's seed."""
    from hydra_plugins.search_sweeper.search_sweeper import SearchSweeperConf
    from search.sweep.sweep_settings import sweep_settings

    conf = SearchSweeperConf()
    given = {f.name: getattr(conf, f.name) for f in dataclasses.fields(conf)
             if f.name not in ("_target_", "_recursive_", "defaults", "sampler", "pruner", "objectives", "nightly")}
    given.update(strategy.settings, seed=seed, n_trials=n_trials, params={})
    return sweep_settings(**given)


def facts_of(table: Table) -> Any:
    """The machine the grid was measured on (or pretends to be), as the practitioner's recipe reads it: a synthetic
    landscape's `hardware` (scripts/bench/landscapes.py), else what its `machine` line says; a GPU where the line
    names one, or where the space holds a precision only a GPU runs (tf32, fp16, fp8)."""
    from search.sweep.recipe import Facts

    hw = table.meta.get("hardware")
    if hw:  # a GPU with native bf16 is Ampere or later
        if hw.get("gpu"):
            return Facts(int(hw.get("cores", 1)), hw["gpu"], (8, 0) if hw.get("bf16_native") else (7, 0))
        return Facts(int(hw.get("cores", 1)), cpu_bf16=bool(hw.get("bf16_native")))
    machine = str(table.meta.get("machine", ""))
    found = re.search(r"(\d+) (?:logical )?cores", machine)
    cores = int(found.group(1)) if found else 1
    named = re.search(r"NVIDIA|Tesla|\b[HABLTV]\d{2,3}\b|\bGPU\b", machine) and "no GPU" not in machine
    gpu_only = {"tf32", "fp16", "fp8"} & set(re.findall(r"[a-z0-9]+", table.space.get("precision", "")))
    if named or gpu_only:
        older = re.search(r"V100|T4|P100|K80", machine)
        return Facts(cores, machine or "NVIDIA GPU", (7, 0) if older else (8, 0))
    return Facts(cores, cpu_bf16=bool(re.search(r"AMX|bf16", machine)))


def forbids_of(table: Table):
    """The space's rules as the replay knows them: a cell the table says is infeasible breaks one with all its
    knobs (the sweep reads the same from the knobs' own rules)."""
    keys = list(table.space)

    class Broken:
        def __init__(self, reason: str):
            self.fields, self.reason = keys, reason

    def forbids(params: Any) -> Any:
        if set(params) != set(keys):
            return None
        result = table.results.get(key_of(dict(params), keys))
        return Broken(result["reason"]) if result is not None and result["outcome"] == "infeasible" else None
    return forbids


class Tally:
    """What a replayed run counts: trials until the target, their seconds, HV@10, the seconds of one sweep."""

    def __init__(self, floor: float, target: float, scale: float, sweep_trials: int):
        self.floor, self.target, self.scale, self.sweep_trials = floor, target, scale, sweep_trials
        self.points: list[tuple[float, float]] = []
        self.path: list[tuple] = []  # the configurations in the order they ran
        self.number: int | None = None  # the Optuna trial number that reached the target
        self.n, self.seconds = 0, 0.0
        self.reached: int | None = None
        self.reached_s: float | None = None
        self.hv: float | None = None
        self.sweep_s: float | None = None

    def add(self, outcome: str, metrics: dict, cost: float, config: tuple = (), number: int | None = None) -> None:
        from grids import hypervolume

        self.n += 1
        self.seconds += cost
        self.path.append(config)
        if outcome == "ok":
            thr, acc = metrics["throughput_samples_per_s"], metrics["val_accuracy"]
            self.points.append((thr, acc))
            if self.reached is None and acc >= self.floor and thr >= self.target:
                self.reached, self.reached_s = self.n, self.seconds
                self.number = (number + 1) if number is not None else self.n
        if self.n == HV_AT:
            self.hv = hypervolume(self.points, self.scale)
        if self.n == self.sweep_trials:
            self.sweep_s = self.seconds

    def result(self, limit: int, stopped_why: str | None) -> dict:
        reached = self.reached
        return {"trials_to_target": reached or limit, "numbers_to_target": self.number or limit,
                "path": tuple(self.path[:self.sweep_trials]),
                "seconds_to_target": self.reached_s if reached else self.seconds,
                "reached": reached is not None, "in_sweep": reached is not None and reached <= self.sweep_trials,
                "hv": self.hv, "sweep_s": self.sweep_s if self.sweep_s is not None else self.seconds,
                "stopped": stopped_why}


def replay(table: Table, name: str, seed: int, floor: float, target: float, sweep_trials: int,
           max_trials: int) -> dict:
    """One strategy, one seed: trials and seconds until the target (a trial that ran ok at the floor and at the
    target), whether the first sweep of `sweep_trials` reached it, and why that sweep stopped."""
    strategy = STRATEGIES[name]
    scale = max(r["metrics"].get("throughput_samples_per_s", 0) for r in table.results.values())
    tally = Tally(floor, target, scale, sweep_trials)
    if strategy.hydra_order:
        for config in table.order:
            result = table.results[key_of(config, list(table.space))]
            tally.add(result["outcome"], result["metrics"], result["metrics"].get("trial_wall_s", 0.0),
                      key_of(config, list(table.space)))
            if tally.reached is not None and tally.n >= sweep_trials:
                break
        return tally.result(len(table.order), None)
    random_search = (strategy.sampler or {}).get("_target_") == RANDOM
    limit = len(table.results) if random_search else min(len(table.results), max_trials)
    search = _Search(table, strategy, seed, limit if random_search else sweep_trials)
    first_stop = None
    while tally.n < limit:  # sweep after sweep, as the same command run again, until the target
        before = tally.n
        why = search.sweep(tally, limit)
        first_stop = why if first_stop is None else first_stop
        if tally.reached is not None or tally.n == before or (why or "").startswith("every"):
            break
    return tally.result(limit, first_stop)


class _Search:
    """The study and the sweep's engine, built as the sweeper builds them."""

    def __init__(self, table: Table, strategy: Strategy, seed: int, n_trials: int):
        import optuna

        from search.sweep import build
        from search.sweep.space import Space, build_space
        from search.sweep.study import make_sampler, name_metrics

        self.table, self.keys, self.train = table, list(table.space), train_settings(table)
        self.settings = settings_of(strategy, seed, n_trials)
        self.space = Space(build_space(table.space, []).distributions, [], forbids_of(table))
        base = make_sampler(dict(strategy.sampler) if strategy.sampler else default_sampler_node(), seed,
                            self.space.distributions)
        self.for_answer = self.settings.search_for == "answer"
        staging = self.settings.staging
        sampler = build.search_sampler(base, self.settings, self.space, OPTIMISED_METRICS, DIRECTIONS,
                                       self.for_answer, staging)
        self.study = optuna.create_study(directions=DIRECTIONS, sampler=sampler)
        name_metrics(self.study, OPTIMISED_METRICS)
        mode = "staged" if self.settings.early_stopping else "off"
        self.policies = build.policies(self.settings, self.space, base, self.for_answer, staging, mode,
                                       (baseline_of(table), 0), facts_of(table))

    def sweep(self, tally: Tally, limit: int) -> str | None:
        """One sweep of n_trials (fewer when the engine ends it, or the run reached `limit`); why it ended early."""
        from search.sweep import build
        from search.sweep.engine import Start

        engine = build.engine(self.study, self.space, self.settings, OPTIMISED_METRICS, DIRECTIONS, [],
                              self.for_answer, self.policies)
        engine.begin(Start(first=True))
        for _ in range(self.settings.n_trials):
            if tally.n >= limit or (why := engine.over()) is not None:
                return None if tally.n >= limit else why
            asked = engine.ask()
            trial = asked.trial
            config = {k: trial.params[k] for k in self.keys}
            result, cost = self.run(config, asked.instructions)
            trial.set_user_attr("search.launched_unix_s", 0.0)  # what the trial cost (search/sweep/trial_cost.py)
            trial.set_user_attr("search.ended_unix_s", cost)
            scored = engine.tell(trial, result)
            tally.add(scored.outcome, scored.metrics, cost, key_of(config, self.keys), trial.number)
        return "n_trials"

    def run(self, config: dict, instructions: Any) -> tuple[dict, float]:
        """The cell's result as the trial would return it under its instructions, and what it costs."""
        result = self.table.results[key_of(config, self.keys)]
        if result["outcome"] != "ok":
            return result, result["metrics"].get("trial_wall_s", 0.0)
        if instructions.throughput_only:
            return result, timed_only_cost(config, result, self.train)
        if instructions.stop_below_samples_per_s is not None:
            return stopped_result(config, result, instructions.stop_below_samples_per_s, self.train)
        return result, result["metrics"].get("trial_wall_s", 0.0)
