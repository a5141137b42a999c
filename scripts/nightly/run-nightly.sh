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
# Exit status: the nightly's own (0 fine, 4 regression, 5 could not run), or 75 when another night still runs.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${SEARCH_NIGHTLY_DIR:-$(cd "$here/../.." && pwd)}
python=${SEARCH_NIGHTLY_PYTHON:-python3}
logs=${SEARCH_NIGHTLY_LOG_DIR:-$dir/logs}
keep_days=${SEARCH_NIGHTLY_KEEP_DAYS:-60}
mkdir -p "$logs"
log="$logs/nightly-$(date +%Y-%m-%d).log"

exec 9>"$dir/.search-nightly.lock"
if ! flock -n 9; then
  echo "$(date -Is) another nightly still holds $dir/.search-nightly.lock: not starting" >>"$log"
  exit 75
fi

cd "$dir" || exit 5
echo "$(date -Is) nightly starts: $python -m search nightly $*" >>"$log"
"$python" -m search nightly "$@" >>"$log" 2>&1
status=$?
echo "$(date -Is) nightly ended with status $status (0 fine, 4 regression, 5 could not run)" >>"$log"
find "$logs" -name 'nightly-*.log' -mtime "+$keep_days" -delete
exit "$status"
