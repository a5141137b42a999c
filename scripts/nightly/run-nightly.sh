#!/usr/bin/env bash
# Runs `python -m search nightly` once, for cron or the systemd timer beside
# this file. Two nights never overlap: a second start while one runs exits
# at once with status 75 (EX_TEMPFAIL) and says so in the log. Every night
# appends to a dated log file; logs older than SEARCH_NIGHTLY_KEEP_DAYS are
# removed.
#
# Settings (environment; the defaults suit a checkout with its own venv):
#   SEARCH_NIGHTLY_DIR        working directory: study journal, MLflow db, nightly/ reports (default: the checkout)
#   SEARCH_NIGHTLY_PYTHON     interpreter with the project installed (default: python3)
#   SEARCH_NIGHTLY_LOG_DIR    where logs go (default: $SEARCH_NIGHTLY_DIR/logs)
#   SEARCH_NIGHTLY_KEEP_DAYS  days of logs kept (default: 60)
# Arguments are Hydra overrides for the nightly, e.g. objective=gpt hydra.sweeper.n_trials=30
#
# Exit status: the nightly's own (0 fine, 4 regression, 5 could not run: anything else the interpreter
# ends with, a missing interpreter's 127 or a kill's 137, is 5 too), or 75 when another night still runs.
# Every status but 0 also prints one line on stderr, naming the report and the log: cron mails a job's
# output (and ignores its status), so a quiet script would let a regression pass unseen.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${SEARCH_NIGHTLY_DIR-$(cd "$here/../.." && pwd)}  # set but empty: refused below, not the checkout
python=${SEARCH_NIGHTLY_PYTHON:-python3}
keep_days=${SEARCH_NIGHTLY_KEEP_DAYS:-60}

say() { echo "search nightly: $*" >&2; }
# A mistyped directory would start a series of its own ("first night", exit 0), not compare with the real one.
if [ -z "$dir" ] || [ ! -d "$dir" ]; then
  say "SEARCH_NIGHTLY_DIR must be an existing directory (the one holding earlier nights); got '$dir'; fix: create it or correct the path"
  exit 5
fi
if [ ! -w "$dir" ]; then
  say "SEARCH_NIGHTLY_DIR must be writable (the study, MLflow's store and the reports go there); got $dir; fix: run as its owner or chmod it"
  exit 5
fi
# absolute: the paths on the stderr line are read in cron's mail, far from where the night ran
abs_dir=$(cd "$dir" 2>/dev/null && pwd) || { say "SEARCH_NIGHTLY_DIR must be enterable by this user; got $dir; fix: chmod u+x it"; exit 5; }
dir=$abs_dir
logs=${SEARCH_NIGHTLY_LOG_DIR:-$dir/logs}
mkdir -p "$logs" || { say "cannot create the log directory $logs; fix: SEARCH_NIGHTLY_LOG_DIR=<a writable directory>"; exit 5; }
abs_logs=$(cd "$logs" 2>/dev/null && pwd) || { say "SEARCH_NIGHTLY_LOG_DIR must be enterable by this user; got $logs; fix: chmod u+x it"; exit 5; }
logs=$abs_logs
log="$logs/nightly-$(date +%Y-%m-%d).log"

if ! exec 9>"$dir/.search-nightly.lock"; then
  say "cannot open the lock file $dir/.search-nightly.lock; fix: make $dir writable for this user"
  exit 5
fi
if ! flock -n 9; then
  echo "$(date -Is) another nightly still holds $dir/.search-nightly.lock: not starting" >>"$log"
  say "not started: the previous night still runs (it holds $dir/.search-nightly.lock); log: $log"
  exit 75
fi

cd "$dir" || exit 5
echo "$(date -Is) nightly starts: $python -m search nightly $*" >>"$log"
start_line=$(wc -l <"$log")
# In a subshell that outlives it (the `exit` keeps bash from exec'ing the interpreter in its place): if the
# interpreter is killed, bash's "Killed" notice goes to the log, not to cron's mail.
( "$python" -m search nightly "$@"; exit $? ) >>"$log" 2>&1
status=$?
case $status in
  0|4|5) ;;
  *) echo "$(date -Is) $python ended with status $status: reported as 5 (could not run)" >>"$log"; status=5 ;;
esac
echo "$(date -Is) nightly ended with status $status (0 fine, 4 regression, 5 could not run)" >>"$log"
find "$logs" -name 'nightly-*.log' -mtime "+$keep_days" -delete
if [ "$status" -ne 0 ]; then
  verdict=$([ "$status" -eq 4 ] && echo "REGRESSION" || echo "could not run")
  # this night's report (`nightly: <verdict>; report: <md> and <html>`), absolute like the log: the nightly prints
  # it so, an older one relative to $dir, where it ran
  report=$(tail -n "+$((start_line + 1))" "$log" | grep -o 'report: .*nightly\.md' | tail -1)
  report=${report#report: }
  case $report in ''|/*) ;; *) report="$dir/$report" ;; esac
  say "$verdict (exit status $status); ${report:+report: $report; }log: $log"
fi
exit "$status"
