"""Several workers on one study, started at the same moment: on the default
journal file and on SQLite. Unique trial numbers, each enqueued trial run
exactly once, no "database is locked" crash, totals add up."""
from __future__ import annotations

import multiprocessing
import os
import re
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf
from optuna.trial import TrialState

from cli_fork import ForkedRun
from conftest import NO_BASELINE, NO_REPORT, REPO, TESTS, pythonpath, start_search

pytestmark = pytest.mark.slow

ENQUEUED = [{"batch_size": 32}, {"batch_size": 128}]


def storage_of(kind: str, workdir: Path) -> tuple[str, str]:
    """(what the sweep is given, what this test opens)"""
    if kind == "journal":
        return str(workdir / "study.journal"), str(workdir / "study.journal")
    url = f"sqlite:///{workdir}/study.db"
    return url, url


def open_study(kind: str, spec: str) -> optuna.Study:
    if kind == "journal":
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        storage = JournalStorage(JournalFileBackend(spec))
    else:
        storage = optuna.storages.RDBStorage(spec)
    return optuna.create_study(study_name="w", storage=storage, directions=["maximize", "maximize"],
                               load_if_exists=True)


@pytest.mark.parametrize("kind, workers", [("journal", 4), ("sqlite", 4)])  # 4: more contention than 2
def test_workers_share_one_study(workdir: Path, kind: str, workers: int) -> None:
    given, opened = storage_of(kind, workdir)
    study = open_study(kind, opened)
    for params in ENQUEUED:
        study.enqueue_trial(params)
    per_worker = 2
    env = {**os.environ, "PYTHONPATH": pythonpath(), "MLFLOW_TRACKING_URI": f"sqlite:///{workdir}/mlflow.db"}
    procs = [start_search(
        "multirun", NO_BASELINE, NO_REPORT, f"hydra.sweeper.storage={given}", "hydra.sweeper.study_name=w",
        f"hydra.sweeper.n_trials={per_worker}", "hydra.sweeper.params=null", "batch_size=choice(16,24,32,40,48,64,80,96,112,128)",
        "train.budget_samples=256", "parallel.devices=1", "loader.num_workers=0", f"hydra.sweep.dir=multirun/{i}",
        cwd=workdir, env=env) for i in range(workers)]
    results = [p.communicate(timeout=600) for p in procs]
    for proc, (out, err) in zip(procs, results):
        assert proc.returncode == 0, err[-3000:]
        assert "locked" not in err
    everything = open_study(kind, opened).trials
    assert sorted(t.number for t in everything) == list(range(len(everything)))  # unique, none lost
    trials = [t for t in everything if t.user_attrs.get("outcome") != "skipped"]  # repeats skipped: search/sweep/no_repeat.py
    assert len(trials) == workers * per_worker
    assert all(t.state == TrialState.COMPLETE for t in trials), [t.user_attrs.get("reason") for t in trials]
    enqueued = [t for t in trials if "fixed_params" in t.system_attrs and "search.replaces" not in t.user_attrs]
    assert sorted(t.params["batch_size"] for t in enqueued) == [32, 128]
    client = MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("w").experiment_id],
                              "tags.`search.role` = 'trial'", max_results=100)
    assert sorted(int(r.data.tags["search.trial_number"]) for r in runs) == sorted(t.number for t in trials)


def test_two_sweeps_started_together_keep_separate_sweep_dirs(workdir: Path) -> None:
    """Without hydra.sweep.dir, two sweeps started in the same second in the same directory
    used to share multirun/<date>/<time>/ and overwrite each other's 0/, 1/ and report/."""
    env = {**os.environ, "PYTHONPATH": pythonpath(), "MLFLOW_TRACKING_URI": f"sqlite:///{workdir}/mlflow.db"}
    command = ["multirun", NO_BASELINE, "hydra.sweeper.study_name=together",
               "hydra.sweeper.n_trials=2", "hydra.sweeper.params=null", "batch_size=choice(16,32,48,64,96,128)",
               "train.budget_samples=256", "parallel.devices=1", "loader.num_workers=0"]
    procs = [start_search(*command, cwd=workdir, env=env) for _ in range(2)]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        outs.append(out)
    sweep_dirs = sorted(p.parent for p in workdir.glob("multirun/*/*/0"))
    assert len(sweep_dirs) == 2, sorted(str(p.relative_to(workdir)) for p in workdir.glob("multirun/*/*"))
    # one study, two workers: the last one searching writes its report (the other's would be a partial one)
    assert len(list(workdir.glob("multirun/*/*/report/*.html"))) >= 1
    assert sum("report: left to the last worker searching this study" in out for out in outs) <= 1
    for sweep_dir in sweep_dirs:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}/\d{2}-\d{2}-\d{2}-[0-9a-f]{6}",
                            str(sweep_dir.relative_to(workdir / "multirun")))  # Hydra's layout, plus an id
        assert {"0", "1"} <= {p.name for p in sweep_dir.iterdir() if p.is_dir()}
        for job in ("0", "1"):  # each job ran in its own sweep's directory
            saved = OmegaConf.load(sweep_dir / job / ".hydra" / "hydra.yaml")
            assert Path(saved.hydra.runtime.output_dir) == (sweep_dir / job).resolve()


FORKED_IDS = r"""
import os, search
from omegaconf import OmegaConf
for _ in range(2):
    if os.fork() == 0:
        print(OmegaConf.create({"d": "${search.sweep_id:}"}).d, flush=True)
        os._exit(0)
    os.wait()
"""


def test_processes_forked_after_importing_search_draw_their_own_sweep_ids() -> None:
    """Drawn at import, the id was the same in every process forked from one that had imported search, and
    two sweeps started so in the same second shared one sweep directory (search/sweep/sweep_dir.py)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FORKED_IDS], env={**os.environ, "PYTHONPATH": pythonpath()},
                          capture_output=True, text=True, timeout=120)
    ids = done.stdout.split()
    assert done.returncode == 0 and len(ids) == 2 and all(re.fullmatch("[0-9a-f]{6}", i) for i in ids), done
    assert ids[0] != ids[1]


def _ask_enqueued(url: str, asks: int, out: object) -> None:
    from optuna.distributions import IntDistribution

    from search.sweep.study import open_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(storage=open_storage(url), study_name="q")
    out.put([study.ask({"x": IntDistribution(0, 1000)}).params["x"] for _ in range(asks)])


def _open_at_once(url: str, barrier: object, out: object) -> None:
    from search.sweep.study import open_storage

    barrier.wait()
    try:
        open_storage(url)
        out.put("ok")
    except BaseException as err:  # noqa: BLE001 - reported to the test
        out.put(f"{type(err).__name__}: {err}")


def test_workers_opening_a_fresh_sqlite_file_at_once_all_open_it(tmp_path: Path) -> None:
    """Optuna creates its tables on first use; workers started together on a new SQLite file race to, and
    SQLite refuses the losers' CREATE TABLE ("table ... already exists"): one of two workers died so in
    the suite, and 8 at once failed so in 9 of 15 rounds. The loser tries again and finds the tables
    (search/sweep/study.py _rdb_storage)."""
    ctx = multiprocessing.get_context("fork")
    for round_ in range(5):
        url = f"sqlite:///{tmp_path}/fresh{round_}.db"
        barrier, out = ctx.Barrier(8), ctx.Queue()
        procs = [ctx.Process(target=_open_at_once, args=(url, barrier, out)) for _ in range(8)]
        for p in procs:
            p.start()
        got = [out.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        assert got == ["ok"] * 8, got


def test_on_sqlite_no_enqueued_trial_goes_to_two_workers(tmp_path: Path) -> None:
    """Optuna pops an enqueued trial by reading it WAITING and writing RUNNING; SQLite ignores FOR UPDATE,
    and with Optuna's plain RDBStorage four workers asking at once got 18 of 200 enqueued trials twice.
    The sweep's SQLite storage begins every transaction IMMEDIATE (search/sweep/study.py)."""
    import multiprocessing

    from search.sweep.study import open_storage

    url = f"sqlite:///{tmp_path}/q.db"
    study = optuna.create_study(storage=open_storage(url), study_name="q")
    for x in range(120):
        study.enqueue_trial({"x": x})
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_ask_enqueued, args=(url, 30, out)) for _ in range(4)]
    for p in procs:
        p.start()
    got = [x for _ in procs for x in out.get(timeout=300)]
    for p in procs:
        p.join(timeout=60)
    assert len(got) == 120 and len(set(got)) == 120, sorted(x for x in set(got) if got.count(x) > 1)


def test_workers_with_the_baseline_run_it_once_and_the_last_one_confirms(workdir: Path) -> None:
    """Two workers started together with the baseline on (the default): the baseline is enqueued once,
    and only the worker that searched last confirms, so no confirmation round is taken by a worker still
    searching (search/sweep/workers.py). Before, each worker enqueued and ran its own confirmation while
    the other searched, and each took the other's rounds as search trials."""
    from search.record import ANSWER_ATTR, ROLE_ATTR, START_ATTR, WORKER_ATTR

    url = f"sqlite:///{workdir}/study.db"
    env = {**os.environ, "PYTHONPATH": pythonpath(), "MLFLOW_TRACKING_URI": f"sqlite:///{workdir}/mlflow.db"}
    procs = [start_search(
        "multirun", f"hydra.sweeper.storage={url}", "hydra.sweeper.study_name=b",
        f"hydra.sweeper.n_trials={n}", "hydra.sweeper.params=null", "batch_size=choice(32,64,128)",
        "precision=choice(fp32,bf16)", "train.budget_samples=1500", "parallel.devices=1", "loader.num_workers=0",
        f"hydra.sweep.dir=multirun/{i}",
        cwd=workdir, env={**env, "COLUMNS": "300"})
        for i, n in enumerate((1, 4))]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        outs.append(out)
    study = optuna.load_study(study_name="b", storage=url)
    trials = study.get_trials(deepcopy=False)
    baseline = [t for t in trials if t.user_attrs.get(ROLE_ATTR) == "baseline"]
    assert len(baseline) == 2, [t.number for t in baseline]  # default baseline_repeats, not once per worker
    assert ANSWER_ATTR in study.user_attrs
    assert "confirmation: left to the last worker still searching" in outs[0], outs[0][-3000:]
    assert "╭─ the answer" in outs[1] and "╭─ the answer" not in outs[0]  # the panel (search/reports/answer.py)
    # the report too: the first worker's would plot half the study (it wrote one before the last worker's)
    assert "report: left to the last worker searching this study" in outs[0]
    assert not (workdir / "multirun" / "0" / "report").exists() and list((workdir / "multirun/1/report").glob("*.png"))
    confirming = {t.user_attrs.get(WORKER_ATTR) for t in trials if t.user_attrs.get(ROLE_ATTR) in ("confirm", "seed_check")}
    assert len(confirming) <= 1, confirming  # every confirmation trial ran on the worker that confirmed
    last_search = max(t.number for t in trials if t.user_attrs.get(ROLE_ATTR) is None)
    assert all(t.number > last_search for t in trials if t.user_attrs.get(ROLE_ATTR) == "confirm")


def test_two_nightly_workers_top_up_once_on_the_worker_that_confirmed(workdir: Path) -> None:
    """Nightly's top-ups (whole runs of tonight's answer) run after the confirmation, on the worker that confirmed.
    Before, a worker that left the confirmation to another topped up too: before the answer existed, so
    another configuration (the fastest so far), while the other worker was still searching."""
    import time

    from search.record import ANSWER_ATTR, NIGHTLY_ROLE_ATTR, ROLE_ATTR, WORKER_ATTR, WORKER_STATE_PREFIX

    url = f"sqlite:///{workdir}/night.db"
    env = {**os.environ, "PYTHONPATH": pythonpath(REPO, TESTS),
           "MLFLOW_TRACKING_URI": f"sqlite:///{workdir}/mlflow.db", "COLUMNS": "300"}

    gate = workdir / "gate"

    def worker(i: int, n: int, held: bool = False) -> ForkedRun:
        return start_search(
            "nightly", NO_REPORT, f"hydra.sweeper.storage={url}",
            "hydra.sweeper.study_name=n", "objective=custom", "objective.callable=paced_objective:objective",
            "hydra.sweeper.params=null", "batch_size=choice(64,128)", f"hydra.sweeper.n_trials={n}",  # 128: 2x 64's
            "hydra.sweeper.nightly.repeats=6",  # 6: more than the search ran
            f"hydra.sweep.dir=multirun/{i}", "+pace.step_ms=200",  # 7 steps: about 1.5 s a trial
            cwd=workdir, env={**env, "PACE_GATE_FILE": str(gate)} if held else env)

    def registered() -> int:
        try:
            study = optuna.load_study(study_name="n", storage=url)
        except KeyError:  # not created yet
            return 0
        return sum(k.startswith(WORKER_STATE_PREFIX) for k in study._storage.get_study_system_attrs(study._study_id))

    # The 3-trial worker registers first, so the 1-trial one starts, runs its trial and ends while the other
    # searches: started together, a slow start of the second (a loaded machine) let the first search, confirm
    # and end alone, and the second then confirmed its own trials as well. The searcher's trials are held until
    # the 1-trial worker has ended: however slowly that one starts, the searcher cannot finish its search first.
    searcher = worker(1, 3, held=True)
    deadline = time.monotonic() + 300
    db = workdir / "night.db"
    while not (db.exists() and db.stat().st_size) and searcher.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # the worker creates the tables: this process must not create them at the same moment
    while registered() == 0 and searcher.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    outs = []
    for proc in [worker(0, 1), searcher]:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, out[-2000:] + err[-3000:]
        outs.append(out)
        gate.touch()
    study = optuna.load_study(study_name="n", storage=url)
    trials = study.get_trials(deepcopy=False)
    confirmed_on = {t.user_attrs.get(WORKER_ATTR) for t in trials
                    if t.user_attrs.get(ROLE_ATTR) in ("confirm", "seed_check")}
    topped = [t for t in trials if t.user_attrs.get(NIGHTLY_ROLE_ATTR) == "top_up"]
    assert sum("confirmation: left to the last worker still searching" in out for out in outs) == 1, outs
    assert len(confirmed_on) == 1 and {t.user_attrs.get(WORKER_ATTR) for t in topped} == confirmed_on
    answer = study.user_attrs[ANSWER_ATTR]["params"]
    assert 1 <= len(topped) <= 6 and all(t.params == answer for t in topped)  # tonight's answer, up to repeats
    assert all(t.state == TrialState.COMPLETE for t in trials)  # none left waiting
    reports = sorted(workdir.glob("multirun/*/report/nightly.md"))  # one for the night, by the last worker
    assert len(reports) == 1, reports
    assert sum("nightly: the report and the regression test are left to the last worker" in o for o in outs) == 1
    assert sum(o.count("(tonight's answer, a whole run)") for o in outs) == len(topped)


def test_a_worker_that_joins_during_the_confirmation_waits_and_takes_none_of_its_trials(workdir: Path) -> None:
    """A second worker started while the first confirms the answer: it enqueues nothing and runs nothing until the
    confirmation is over, and the confirmation runs its own trials only. Before, the joiner (the first worker
    searching, since the confirmer was not) planned its start during the confirmation; had it enqueued a start
    move then, the confirmer, which runs the oldest waiting trial next, would have run it as a round
    (search/sweep/workers.py)."""
    import time

    from search.record import ANSWER_ATTR, ROLE_ATTR, START_ATTR, WORKER_ATTR

    url = f"sqlite:///{workdir}/join.db"
    env = {**os.environ, "PYTHONPATH": pythonpath(REPO, TESTS),
           "MLFLOW_TRACKING_URI": f"sqlite:///{workdir}/mlflow.db", "COLUMNS": "300"}
    gate = workdir / "gate"  # open while it exists: the first worker's trials wait for it before their steps
    gate.touch()

    def worker(i: int, n_trials: int, *extra: str, gated: bool = False) -> ForkedRun:
        # your configuration's 2 runs, the recipe, the two speed-only knobs' moves; the joiner's trial is the next
        # move, batch 32: half your configuration's speed (the paced objective's speed is its batch size's)
        return start_search(
            "multirun", NO_REPORT, f"hydra.sweeper.storage={url}",
            "hydra.sweeper.study_name=join", "objective=custom", "objective.callable=paced_objective:objective",
            "hydra.sweeper.params=null", "batch_size=choice(32,64)", "loader.num_workers=choice(0,1)",
            "parallel.threads=choice(1,2)",
            "+pace.step_ms=200", f"hydra.sweeper.n_trials={n_trials}", f"hydra.sweep.dir=multirun/{i}", *extra,
            cwd=workdir, env={**env, "PACE_GATE_FILE": str(gate)} if gated else env)

    def confirming(study: optuna.Study) -> bool:
        return any(t.user_attrs.get(ROLE_ATTR) == "confirm" for t in study.get_trials(deepcopy=False))

    first = worker(0, 5, gated=True)
    deadline = time.monotonic() + 300
    study = None
    while time.monotonic() < deadline and first.poll() is None:
        try:
            study = study or optuna.load_study(study_name="join", storage=url)
        except KeyError:  # not created yet
            pass
        if study is not None and confirming(study):
            break
        time.sleep(0.1)
    assert first.poll() is None and study is not None and confirming(study), "the first worker never confirmed"
    # The confirmation's next round waits at the gate until the second worker, however slowly it starts (a loaded
    # machine), has joined and is waiting: the confirmation cannot end before the joiner arrives.
    gate.unlink()
    second = worker(1, 1, "hydra.sweeper.confirm_budget=0")
    while "waiting: worker" not in second.stdout_so_far() and second.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    gate.touch()
    outs = []
    for proc in (first, second):
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, out[-2000:] + err[-3000:]
        outs.append(out)
    assert "waiting: worker" in outs[1] and "is confirming this study's answer" in outs[1], outs[1][-3000:]
    trials = study.get_trials(deepcopy=False)
    confirmer = {t.user_attrs.get(WORKER_ATTR) for t in trials if t.user_attrs.get(ROLE_ATTR) in ("confirm", "seed_check")}
    assert len(confirmer) == 1, confirmer  # every round and check ran on the worker that confirmed
    first_round = min(t.number for t in trials if t.user_attrs.get(ROLE_ATTR) == "confirm")
    confirmation = [t for t in trials if t.number >= first_round and t.user_attrs.get(WORKER_ATTR) in confirmer]
    assert all(t.user_attrs.get(ROLE_ATTR) in ("confirm", "seed_check") for t in confirmation), \
        [(t.number, t.user_attrs.get(ROLE_ATTR), t.params) for t in confirmation]  # no joiner's trial among them
    joined = [t for t in trials if t.user_attrs.get(WORKER_ATTR) not in confirmer]
    assert joined and min(t.number for t in joined) > max(t.number for t in confirmation)  # after it, not during
    assert joined[0].user_attrs.get(START_ATTR) == "batch_size" and joined[0].params["batch_size"] == 32
    assert all(t.state == TrialState.COMPLETE for t in trials)  # none left waiting
    # the joiner's move runs at half the speed: the answer the first worker confirmed meanwhile stands, neither
    # confirmed nor stored again (before: a second answer, its budget that of a 1-trial search)
    answer = study.user_attrs[ANSWER_ATTR]
    assert answer["confirmed_by"] in confirmer and answer["standing"] is False, answer
    assert "it stands without new rounds" in outs[1] and "confirming:" not in outs[1], outs[1][-3000:]
