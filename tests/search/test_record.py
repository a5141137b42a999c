"""The record (search/record/): the study's stored vocabulary at the bottom of search/. It imports nothing of
search/ but itself, each stored key is one string under one name, and its typed reads give what the trial holds."""
from __future__ import annotations

import ast
import os
import subprocess
import sys

import optuna
from optuna.trial import TrialState

import search.record as record
from conftest import REPO, pythonpath
from search.record import keys


def test_the_record_imports_nothing_of_search_but_itself() -> None:
    offending = []
    for path in sorted((REPO / "search" / "record").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            offending += [f"{path.name} imports {n}" for n in names
                          if n.split(".")[0] in ("search", "objectives") and not n.startswith("search.record")]
    assert offending == []
    # What `import search.record` loads beyond what `import search` itself does (its resolvers): only the record,
    # and no Optuna either (reading a trial needs none).
    code = ("import sys, search; before = set(sys.modules); import search.record; "
            "print(sorted(m for m in set(sys.modules) - before if m.startswith(('search', 'objectives', 'optuna'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": pythonpath()}).stdout
    loaded = ast.literal_eval(out.strip())
    assert loaded == ["search.record", *(f"search.record.{m}" for m in ("answer", "keys", "outcomes", "trials"))]


def test_each_stored_key_is_one_string_under_one_name() -> None:
    stored = {name: value for name, value in vars(keys).items()
              if (name.endswith("_ATTR") or name.endswith("_PREFIX")) and isinstance(value, str)}
    assert len(set(stored.values())) == len(stored), stored
    assert set(keys.MOVES) <= set(keys.PROPOSALS_ENQUEUED) <= set(keys.ENQUEUED_AS)
    assert set(record.__all__) <= set(dir(record))


def test_the_typed_reads_give_what_a_trial_holds() -> None:
    ran = optuna.trial.create_trial(
        values=[900.0, 0.9], params={}, distributions={}, state=TrialState.COMPLETE,
        user_attrs={keys.OUTCOME_ATTR: record.OK, keys.REASON_ATTR: "", keys.ROLE_ATTR: keys.BASELINE,
                    keys.SEED_ATTR: 1, keys.METRICS_ATTR: {record.THROUGHPUT: 900.0, record.ACCURACY: 0.9},
                    keys.HALFWAY_ATTR: "batch_size", keys.LAUNCHED_ATTR: 10.0, keys.ENDED_ATTR: 12.5,
                    keys.CONSTRAINTS_ATTR: {record.RUNNABLE: 0.0}},
        system_attrs={"constraints": [0.0]})
    assert (record.outcome(ran), record.reason(ran), record.role(ran), record.seed(ran)) == ("ok", "", "baseline", 1)
    assert (record.throughput(ran), record.accuracy(ran)) == (900.0, 0.9)
    assert record.move_of(ran) == (keys.HALFWAY_ATTR, "batch_size")
    assert (record.launched_unix_s(ran), record.ended_unix_s(ran)) == (10.0, 12.5)
    assert record.named_constraints(ran) == {"runnable": 0.0} and record.is_feasible(ran)
    waiting = optuna.trial.create_trial(state=TrialState.WAITING)
    assert (record.outcome(waiting), record.outcome(waiting, unrecorded=record.OK)) == ("", "ok")
    assert (record.metrics(waiting), record.throughput(waiting), record.role(waiting), record.move_of(waiting)) == (
        {}, None, None, None)
