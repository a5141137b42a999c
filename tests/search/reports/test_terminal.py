"""What the terminal shows, rendered at 80, 100 and 200 columns: the live
progress line keeps the count, the ETA and the best values; the front table
keeps whole headers and numbers, and shows the knobs that differ from the
baseline. Real Optuna studies, rich's own rendering (a recording console)."""
from __future__ import annotations

import re

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from rich.console import Console

from search.record import ROLE_ATTR, SEED_ATTR
from search.reports.progress import SweepProgress, finished_line, status_line
from search.reports.tables import BASELINE, compare_label, front_table, front_trials

WIDTHS = (80, 100, 200)
METRICS = ["throughput_samples_per_s", "val_accuracy"]
SPACE = {
    "batch_size": CategoricalDistribution([32, 64, 128, 256]),
    "loader.num_workers": CategoricalDistribution([0, 1, 2]),
    "loader.persistent_workers": CategoricalDistribution([False, True]),
    "precision": CategoricalDistribution(["fp32", "bf16"]),
    "model_pruning.ratio": CategoricalDistribution([0.0, 0.25, 0.5]),
    "parallel.devices": CategoricalDistribution([1, 2]),
    "parallel.threads": CategoricalDistribution([1, 2]),
}
USER = {"batch_size": 64, "loader.num_workers": 0, "loader.persistent_workers": False, "precision": "fp32",
        "model_pruning.ratio": 0.0, "parallel.devices": 1, "parallel.threads": 1}


def _add(study: optuna.Study, params: dict, throughput: float, accuracy: float, role: str | None = None) -> None:
    attrs = {"metrics": {"throughput_samples_per_s": throughput, "val_accuracy": accuracy}, "outcome": "ok"}
    if role:
        attrs[ROLE_ATTR] = role
    study.add_trial(optuna.trial.create_trial(params=params, distributions=SPACE, values=[throughput, accuracy],
                                              user_attrs=attrs))


def _study(with_baseline: bool) -> optuna.Study:
    study = optuna.create_study(directions=["maximize", "maximize"], study_name="digits")
    if with_baseline:
        _add(study, USER, 1000.0, 0.95, BASELINE)
        _add(study, USER, 1040.0, 0.95, BASELINE)
    _add(study, {**USER, "batch_size": 256, "precision": "bf16", "loader.num_workers": 2}, 18_234.5, 0.93)
    _add(study, {**USER, "batch_size": 128, "precision": "bf16", "model_pruning.ratio": 0.25}, 12_001.0, 0.9612)
    _add(study, {**USER, "batch_size": 32, "parallel.threads": 2}, 900.0, 0.97)
    _add(study, {**USER, "batch_size": 32}, 500.0, 0.5)  # dominated
    return study


def flat(text: str) -> str:
    return " ".join(text.split())


def _last_column(lines: list[str]) -> dict[str, str]:
    """The front table's last column by trial, its wrapped lines joined (a row continues while its trial cell is
    empty)."""
    cells: dict[str, str] = {}
    trial = ""
    for line in lines:
        if not line.startswith("│"):
            continue
        parts = [p.strip() for p in line.strip("│").split("│")]
        trial = parts[0] or trial
        cells[trial] = " ".join(x for x in (cells.get(trial, ""), parts[-1]) if x)
    return cells


def _render(renderable, width: int) -> list[str]:
    out = Console(width=width, record=True, force_terminal=False, color_system=None)
    out.print(renderable)
    return out.export_text().splitlines()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_progress_line_keeps_count_eta_and_best_at_any_width(width: int) -> None:
    best = {"throughput_samples_per_s": 18_234.5, "val_accuracy": 0.9733}
    [line] = _render(status_line(7, 20, 95.0, best, width, "best trial 5"), width)
    assert len(line) <= width
    assert "trials 7/20" in line and "ETA 2:56" in line  # 95 s for 7 trials, 13 left
    assert "best trial 5: 18,234 samples/s  0.9733 val acc" in line
    assert "1:35" in line  # the elapsed time
    assert ("━" in line) == (width >= 100)  # the bar, where it fits beside the rest


def test_a_narrow_line_drops_the_bar_then_the_elapsed_time_and_keeps_the_rest() -> None:
    best = {"throughput_samples_per_s": 18_234.5, "val_accuracy": 0.9733}
    [line] = _render(status_line(7, 20, 95.0, best, 90, "best of each"), 90)
    assert line.startswith("trials 7/20 ━") and line.endswith(" 1:35 ETA 2:56 best of each: 18,234 samples/s  "
                                                                "0.9733 val acc")
    [line] = _render(status_line(7, 20, 95.0, best, 74, "best of each"), 74)
    assert line == "trials 7/20 1:35 ETA 2:56 best of each: 18,234 samples/s  0.9733 val acc"
    [line] = _render(status_line(7, 20, 95.0, best, 69, "best of each"), 69)
    assert line == "trials 7/20 ETA 2:56 best of each: 18,234 samples/s  0.9733 val acc"


def test_before_a_trial_ends_the_eta_is_unknown_and_no_best_is_claimed() -> None:
    [line] = _render(status_line(0, 20, 3.0, {}, 80), 80)
    assert "trials 0/20" in line and "ETA --:--" in line and "best" not in line


@pytest.mark.parametrize("width", WIDTHS)
def test_the_live_display_shows_the_running_trial_cut_at_the_width(width: int) -> None:
    out = Console(width=width, record=True, force_terminal=False, color_system=None)
    progress = SweepProgress(20, METRICS, console=out)
    progress.started([3], {f"knob.number_{i}": 1000 + i for i in range(30)})
    lines = _render(progress.renderable(width), width)
    assert lines[0].startswith("trials 0/20") and "ETA" in lines[0]
    assert lines[1].startswith("  running trial 3: number_0=1000") and len(lines[1]) <= width
    assert lines[1].endswith("…") and len(lines) == 2


def test_a_finished_trial_leaves_one_line_with_short_metric_names() -> None:
    line = finished_line(4, "ok", {"throughput_samples_per_s": 18234.5, "val_accuracy": 0.93}, METRICS,
                         {"batch_size": 256, "loader.num_workers": 2, "precision": "bf16"})
    [text] = _render(line, 100)
    assert text == "trial 4 ok  18,234 samples/s  0.93 val acc  batch_size=256 num_workers=2 precision=bf16"
    [failed] = _render(finished_line(5, "oom", {}, METRICS, {"batch_size": 256}, "out of memory [CUDA]"), 100)
    assert failed == "trial 5 oom  batch_size=256  out of memory [CUDA]"


def test_a_trial_that_was_not_an_ordinary_proposal_says_what_it_was_run_for() -> None:
    from search.sweep.closing import trial_kind

    assert trial_kind({}) == ""
    assert trial_kind({ROLE_ATTR: "baseline", SEED_ATTR: 1}) == "baseline, seed 1"
    assert trial_kind({"search.accuracy_from": 6}) == "timed only, val acc of trial 6"
    assert trial_kind({ROLE_ATTR: "confirm", "search.confirm_round": 1, "search.accuracy_from": 0}) == \
        "confirmation round 1, timed only, val acc of trial 0"
    assert trial_kind({ROLE_ATTR: "seed_check", SEED_ATTR: 1}) == "second-seed check, seed 1"
    line = finished_line(1, "ok", {"throughput_samples_per_s": 1518.0, "val_accuracy": 0.9833}, METRICS,
                         {"batch_size": 64}, kind="baseline, seed 1")
    [text] = _render(line, 100)
    assert text == "trial 1 ok (baseline, seed 1)  1,518 samples/s  0.9833 val acc  batch_size=64"


def test_a_run_at_another_seed_is_not_the_best_so_far() -> None:
    out = Console(width=100, record=True, force_terminal=False, color_system=None)
    progress = SweepProgress(3, METRICS, console=out)
    progress.finished(0, "ok", {"throughput_samples_per_s": 1540.0, "val_accuracy": 0.9749}, {}, ["maximize"] * 2)
    progress.finished(1, "ok", {"throughput_samples_per_s": 1518.0, "val_accuracy": 0.9833}, {}, ["maximize"] * 2,
                      kind="baseline, seed 1", counts_as_best=False)
    [status] = _render(progress.renderable(100), 100)
    assert "best of each: 1,540 samples/s  0.9749 val acc" in status


def test_searching_for_the_answer_the_best_so_far_is_one_trial_with_its_own_figures() -> None:
    """A default sweep's status line ended `best 1,788 samples/s  0.9777 val acc`: the speed of a trial at
    0.8747 (below the floor) beside the accuracy of your configuration's run, a trial that never existed."""
    out = Console(width=100, record=True, force_terminal=False, color_system=None)
    progress = SweepProgress(3, METRICS, console=out)
    fast_below, answer = {"throughput_samples_per_s": 1788.0, "val_accuracy": 0.8747}, \
        {"throughput_samples_per_s": 1560.0, "val_accuracy": 0.9749}
    progress.finished(0, "ok", {"throughput_samples_per_s": 1300.0, "val_accuracy": 0.9777}, {}, ["maximize"] * 2)
    progress.finished(17, "ok", fast_below, {}, ["maximize"] * 2)
    progress.stand(18, answer)
    progress.finished(18, "ok", answer, {}, ["maximize"] * 2)
    [status] = _render(progress.renderable(100), 100)
    assert "best trial 18: 1,560 samples/s  0.9749 val acc" in status, status
    assert "1,788" not in status and "0.9777" not in status


def test_one_metric_is_simply_the_best() -> None:
    out = Console(width=100, record=True, force_terminal=False, color_system=None)
    progress = SweepProgress(3, ["throughput_samples_per_s"], console=out)
    progress.finished(0, "ok", {"throughput_samples_per_s": 1540.0}, {}, ["maximize"])
    [status] = _render(progress.renderable(100), 100)
    assert "best: 1,540 samples/s" in status


@pytest.mark.parametrize("width", WIDTHS)
def test_the_front_shows_metrics_speedup_and_the_knobs_that_differ_from_the_baseline(width: int) -> None:
    lines = _render(front_table(_study(with_baseline=True), METRICS, width), width)
    text = "\n".join(lines)
    assert all(len(line) <= width for line in lines), text
    assert "…" not in text and "..." not in text, text  # nothing squeezed
    assert lines[0].startswith("Pareto front of study 'digits' (3 trials)")
    header = next(line for line in lines if "trial" in line and "samples/s" in line)
    assert re.search(r"samples/s ↑ .* val acc ↑ .* vs base", header), header
    assert "persistent_workers" not in header and "devices" not in header  # the same as the baseline's
    assert "18,234" in text and "0.9612" in text and "17.88x" in text  # 18,234.5 / median(1000, 1040)
    assert "the baseline (batch_size=64 num_workers=0 persistent_workers=False" in flat(text)
    # those that change the model's maths first (they explain the accuracy column), then the speed-only ones
    differing = ["batch_size", "precision", "model_pruning.ratio", "loader.num_workers", "parallel.threads"]
    if width == 200:  # a column per knob, in that order
        assert [k for k in differing if k.split(".")[-1] in header] == differing
        assert "knobs shown: those that differ from the baseline" in flat(text)
    else:  # not all fit: one column of each row's changes, wrapped, none left out (at 80 columns the knob
        # columns kept the first 3 and named the others under the table)
        assert "changes" in header and "batch_size" not in header
        assert list(_last_column(lines).values()) == [
            "batch_size=256 precision=bf16 num_workers=2", "batch_size=128 precision=bf16 ratio=0.25",
            "batch_size=32 threads=2"], text
        assert "changes: the knobs each row sets otherwise than the baseline" in flat(text)
    assert "not shown" not in flat(text) and "MLflow and the report" in text


def test_a_knob_without_effect_is_no_difference_and_shows_as_such() -> None:
    """A user pass read a front at 100 columns: a persistent_workers column showing True beside num_workers=0
    (it changes nothing there), and model_pruning.ratio, which explained the accuracy, left out for width."""
    from search.sweep.combinations import fit_to_rules
    from search.sweep.space import build_space
    from objectives import Hardware
    from objectives.config import parse_values

    space, _ = fit_to_rules(build_space({}, [f"{k}=choice({','.join(map(str, d.choices)).lower()})"
                                             for k, d in SPACE.items()]), parse_values({}),
                            Hardware(cpu_cores=2, why_no_gpu="none here"))
    study = optuna.create_study(directions=["maximize", "maximize"], study_name="digits")
    _add(study, USER, 1000.0, 0.97, BASELINE)
    _add(study, {**USER, "loader.persistent_workers": True, "model_pruning.ratio": 0.5}, 2900.0, 0.92)
    _add(study, {**USER, "loader.num_workers": 2, "loader.persistent_workers": True}, 1900.0, 0.97)
    text = "\n".join(_render(front_table(study, METRICS, 100, space.unused), 100))
    header = next(line for line in text.splitlines() if "trial" in line and "samples/s" in line)
    assert re.search(r"ratio .* num_workers .* persistent_workers", header), header  # the maths first
    row = next(line for line in text.splitlines() if "2,900" in line)
    assert row.rstrip(" │").endswith("–"), row  # persistent workers beside no workers: without effect
    assert "–: without effect beside the row's other values" in flat(text)
    plain = "\n".join(_render(front_table(study, METRICS, 100), 100))  # told nothing: the values as they are
    assert "–" not in plain
    # the answer's own knobs first, whatever the width leaves out: its row reads whole
    study.set_user_attr("search.answer", {"params": {**USER, "loader.num_workers": 2,
                                                     "loader.persistent_workers": True}, "trials": [2]})
    lines = _render(front_table(study, METRICS, 80, space.unused), 80)
    # at 80 columns, one column of changes, the answer's knobs first; persistent workers beside no workers is no
    # change, and the model pruning that explains the accuracy is there (the knob columns had left it out)
    assert _last_column(lines) == {"1": "ratio=0.5", "2 *": "num_workers=2 persistent_workers=True"}, lines
    # workers without persistent ones, against your configuration's none: persistent_workers=False is yours,
    # no change (the CI's README sweep listed it)
    _add(study, {**USER, "loader.num_workers": 2, "model_pruning.ratio": 0.25}, 2500.0, 0.95)
    lines = _render(front_table(study, METRICS, 80, space.unused), 80)
    assert _last_column(lines)["3"] == "num_workers=2 ratio=0.25", lines  # the answer's knobs first
    body = flat("\n".join(lines))
    assert "not shown" not in body and "–" not in body


def test_the_front_leaves_out_other_seeds_and_shows_a_configuration_once() -> None:
    """A run at another seed (the baseline's second) is another draw of its accuracy, not a point of the
    front; a configuration measured again (the confirmation's rounds) is one row."""
    study = _study(with_baseline=True)
    fast = {**USER, "batch_size": 256, "precision": "bf16", "loader.num_workers": 2}
    _add(study, fast, 18_234.5, 0.93)  # re-measured: the same figures
    attrs = {"metrics": {"throughput_samples_per_s": 1100.0, "val_accuracy": 0.99}, "outcome": "ok",
             ROLE_ATTR: BASELINE, SEED_ATTR: 1}
    study.add_trial(optuna.trial.create_trial(params=USER, distributions=SPACE, values=[1100.0, 0.99],
                                              user_attrs=attrs))
    assert 7 in {t.number for t in study.best_trials}  # Optuna's own front takes it
    assert [t.number for t in front_trials(study)] == [2, 3, 4]
    assert "(3 trials)" in _render(front_table(study, METRICS, 100), 100)[0]


def test_the_answers_trials_are_marked() -> None:
    study = _study(with_baseline=True)
    study.set_user_attr("search.answer", {"trials": [3], "params": {}, "speedup": 11.8})
    text = "\n".join(_render(front_table(study, METRICS, 100), 100))
    assert re.search(r"│ +3 \* │ +12,001 │", text) and "* the answer" in text, text


def test_a_configuration_the_confirmation_re_measured_is_its_first_trial_at_the_median_of_its_runs() -> None:
    """Seen in a default sweep: the answer's configuration showed as a confirmation round (its luckiest run,
    1.83x) without the answer's mark, above a panel saying 1.69x."""
    study = _study(with_baseline=True)
    answer = {**USER, "batch_size": 128, "precision": "bf16", "model_pruning.ratio": 0.25}
    for throughput in (14_000.0, 11_000.0, 12_500.0):  # the rounds, timed only, with the search trial's accuracy
        _add(study, answer, throughput, 0.9612, "confirm")
    study.set_user_attr("search.answer", {"trials": [3], "params": answer, "speedup": 11.8})
    assert [t.number for t in front_trials(study)] == [2, 3, 4]
    text = "\n".join(_render(front_table(study, METRICS, 100), 100))
    assert re.search(r"│ +3 \* │ +12,250 │ +0.9612 │ +12.01x │", text), text  # median(12,001, 14,000, 11,000, 12,500)
    assert "14,000" not in text and "figures the median of its runs" in flat(text)


def test_an_answer_its_confirmation_moved_off_the_front_is_shown_under_it() -> None:
    """Seen in a default sweep: the panel answered `loader.num_workers=2` (its median over the confirmation
    below one search run of the same with persistent workers), and the front table had no row for it."""
    study = _study(with_baseline=True)
    answer = {**USER, "loader.num_workers": 2}
    for throughput, role in ((2_684.0, None), (2_328.0, "confirm"), (1_866.0, "confirm"), (2_075.0, "confirm")):
        _add(study, answer, throughput, 0.95, role)
    study.set_user_attr("search.answer", {"trials": [6], "params": answer, "speedup": 1.45})
    lines = _render(front_table(study, METRICS, 200), 200)
    text = "\n".join(lines)
    assert lines[0].startswith("Pareto front of study 'digits' (3 trials)"), text  # the front alone
    rows = [line for line in lines if re.match(r"│ +\d", line)]
    assert len(rows) == 4, text  # the front's three, then the answer at the median of its four runs:
    assert re.match(r"│ +6 \* │ +2,202 │ +0.95 │ +2.16x │", rows[-1]), text
    assert "* the answer, in the last row: not on the front" in flat(text)
    # your configuration as the answer, off the front (a pass's default sweeps: no row carried the mark)
    study.set_user_attr("search.answer", {"trials": [0], "params": USER, "is_baseline": True, "speedup": 1.0})
    lines = _render(front_table(study, METRICS, 200), 200)
    rows = [line for line in lines if re.match(r"│ +\d", line)]
    assert len(rows) == 4 and re.match(r"│ +0 \* │ .* │ +1.00x │", rows[-1]), "\n".join(lines)
    assert "* the answer, in the last row: not on the front" in flat("\n".join(lines))


def test_without_a_baseline_the_knobs_are_compared_with_the_first_complete_trial() -> None:
    lines = _render(front_table(_study(with_baseline=False), METRICS, 100), 100)
    text = "\n".join(lines)
    assert "vs base" not in text
    assert "differ from trial 0, the first complete one (batch_size=256 num_workers=2" in flat(text)


def test_vs_base_divides_by_the_baselines_row_with_its_rounds_not_its_other_seed() -> None:
    """Seen in nightly and default sweeps: the column divided by the median of the baseline's two runs (its slow
    first and its second seed), so the baseline, the answer, read 0.73x of itself, and a row read 1.57x above a
    panel of 1.06x."""
    study = optuna.create_study(directions=["maximize", "maximize"], study_name="digits")
    _add(study, USER, 826.0, 0.95, BASELINE)
    study.add_trial(optuna.trial.create_trial(
        params=USER, distributions=SPACE, values=[1440.0, 0.96],
        user_attrs={"metrics": {"throughput_samples_per_s": 1440.0, "val_accuracy": 0.96}, "outcome": "ok",
                    ROLE_ATTR: BASELINE, SEED_ATTR: 1}))
    for throughput in (1_500.0, 1_560.0):
        _add(study, USER, throughput, 0.95, "confirm")
    _add(study, {**USER, "precision": "bf16"}, 1_591.0, 0.94)
    answer = {"trials": [0], "params": USER, "is_baseline": True, "speedup": 1.0, "rounds": 2}
    study.set_user_attr("search.answer", answer)
    text = "\n".join(_render(front_table(study, METRICS, 200), 200))
    assert re.search(r"│ +0 \* │ +1,500 │ +0.95 │ +1.00x │", text), text  # median(826, 1,500, 1,560)
    assert re.search(r"│ +4 │ +1,591 │ +0.94 │ +1.06x │", text), text
    assert "the answer panel's speedups pair the confirmation's interleaved rounds" in flat(text)
    study.set_user_attr("search.answer", {**answer, "rounds": 0})  # no confirmation ran: no rounds to speak of
    text = "\n".join(_render(front_table(study, METRICS, 200), 200))
    assert "vs base: the row's median over your configuration's, at your seed" in flat(text)
    assert "interleaved rounds" not in flat(text)


def test_an_infeasible_trial_says_which_constraint_it_broke_and_by_what() -> None:
    line = finished_line(3, "ok", {"throughput_samples_per_s": 1335.0, "val_accuracy": 0.8607}, METRICS,
                         {"batch_size": 64}, feasible=False, violated="val_accuracy >= 0.9 (got 0.8607)")
    [text] = _render(line, 200)
    assert text.endswith("batch_size=64  infeasible: violates val_accuracy >= 0.9 (got 0.8607)"), text


def test_the_compare_links_label_names_each_kind_of_run_it_holds_once():
    assert compare_label(True, False, True) == "the answer, the baseline, the front"
    assert compare_label(True, True, True) == "the answer, your configuration; the front"  # the same runs, once
    assert compare_label(False, False, True) == "the baseline, the front"
    assert compare_label(False, False, False) == "the front"
    assert compare_label(True, True, True, front_adds=False) == "the answer, your configuration"  # the front is it
    assert compare_label(True, False, True, front_adds=False) == "the answer, the baseline"


def test_the_sweep_reads_the_not_applied_warning_under_the_key_trials_write_it():
    from objectives.result import NOT_APPLIED_WARNING as written
    from search.reports.labels import NOT_APPLIED_WARNING as read

    assert written == read == "knobs_not_applied_warning"


@pytest.mark.parametrize("width", WIDTHS)
def test_the_notes_before_the_first_trial_wrap_at_the_width_and_keep_a_long_path_whole(width: int, capsys,
                                                                                       monkeypatch) -> None:
    """The sweep's notes (the baseline, the start design, the space's rules) ran to 250 columns in a log."""
    from search.reports.tables import say

    monkeypatch.setenv("COLUMNS", str(width))
    path = "/home/someone/" + "deep/" * 30 + "optuna.journal"  # longer than any width here
    note = ("baseline, your configuration (batch_size=64 loader.num_workers=0 loader.persistent_workers=False "
            "precision=fp32 model_pruning.ratio=0.0 parallel.devices=1 parallel.threads=1): runs first, 2 time(s), "
            f"never stopped early; study in {path}\nand a second line")
    say(note)
    lines = capsys.readouterr().out.splitlines()
    assert all(len(line) <= width for line in lines if path not in line), lines
    assert path in lines and lines[-1] == "and a second line"
    assert " ".join(lines) == " ".join(note.split())  # every word, in order
