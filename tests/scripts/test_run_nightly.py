"""scripts/nightly/run-nightly.sh as cron runs it: cron mails a job's output and ignores its exit status, so
every status but 0 must print one line; the status is 0, 4, 5 or 75 whatever the interpreter ended with; a
mistyped working directory is refused, not created. The interpreter here is a stand-in script that prints
what the nightly prints and exits as told (the nightly itself runs in tests/search/nightly/)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import REPO

SCRIPT = REPO / "scripts" / "nightly" / "run-nightly.sh"


REPORTS = ("echo 'nightly: regression; report: nightly/2026-11-27/x/report/nightly.md and "
           "nightly/2026-11-27/x/report/nightly.html'\n")


def night(tmp_path: Path, exit_status: int, directory: Path | str | None = None,
          prints: str = REPORTS) -> subprocess.CompletedProcess:
    stand_in = tmp_path / "python"
    stand_in.write_text(f"#!/bin/sh\n{prints}exit {exit_status}\n" if exit_status != 137 else "#!/bin/sh\nkill -9 $$\n")
    stand_in.chmod(0o755)
    env = {**os.environ, "SEARCH_NIGHTLY_PYTHON": str(stand_in),
           "SEARCH_NIGHTLY_DIR": str(tmp_path / "work" if directory is None else directory)}
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)


def test_a_regression_says_so_on_stderr_with_the_report_and_the_log(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    done = night(tmp_path, 4)
    assert done.returncode == 4 and done.stdout == ""
    work = tmp_path / "work"
    assert done.stderr == (f"search nightly: REGRESSION (exit status 4); report: "  # was silent
                           f"{work}/nightly/2026-11-27/x/report/nightly.md; log: {work}/logs/"
                           f"{next((work / 'logs').glob('nightly-*.log')).name}\n"), done.stderr
    assert night(tmp_path, 0).stderr == ""  # a fine night mails nothing


def test_the_line_names_the_report_and_the_log_by_absolute_paths(tmp_path: Path, monkeypatch) -> None:
    """Was `report: nightly/...` (relative to SEARCH_NIGHTLY_DIR) beside an absolute log path: read in cron's mail,
    the report could not be found. A relative SEARCH_NIGHTLY_DIR, an absolute report as the nightly prints it now
    (a directory with a space in its name), and a relative log directory all come out absolute."""
    work = tmp_path / "my nights"
    work.mkdir()
    monkeypatch.chdir(tmp_path)
    printed = f"echo 'nightly: regression; report: {work}/n/report/nightly.md and {work}/n/report/nightly.html'\n"
    done = night(tmp_path, 4, directory="my nights", prints=printed)
    assert f"; report: {work}/n/report/nightly.md; log: {work}/logs/nightly-" in done.stderr, done.stderr
    monkeypatch.setenv("SEARCH_NIGHTLY_LOG_DIR", "cron-logs")  # relative to where cron started the script
    relative_log = night(tmp_path, 4, directory="my nights")
    assert f"report: {work}/nightly/2026-11-27/x/report/nightly.md; log: {tmp_path}/cron-logs/nightly-" \
        in relative_log.stderr, relative_log.stderr


def test_any_other_status_is_could_not_run(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    done = night(tmp_path, 137)  # killed (OOM, SIGKILL); 127: no interpreter
    assert done.returncode == 5 and "could not run (exit status 5)" in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr  # was bash's "Killed" notice besides
    log = next((tmp_path / "work" / "logs").glob("nightly-*.log")).read_text()
    assert "ended with status 137: reported as 5" in log


def test_a_mistyped_working_directory_is_refused_not_created(tmp_path: Path) -> None:
    done = night(tmp_path, 0, directory=tmp_path / "wrok")
    assert done.returncode == 5 and "SEARCH_NIGHTLY_DIR must be an existing directory" in done.stderr
    assert not (tmp_path / "wrok").exists()
    empty = night(tmp_path, 0, directory="")  # was: the checkout, silently
    assert empty.returncode == 5 and "SEARCH_NIGHTLY_DIR must be an existing directory" in empty.stderr


def test_the_line_names_this_nights_report_not_an_earlier_one_of_the_same_day(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    assert night(tmp_path, 4).returncode == 4
    later = night(tmp_path, 5, prints="")  # could not run: no report of its own
    assert later.returncode == 5 and "report:" not in later.stderr, later.stderr
