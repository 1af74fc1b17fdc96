#!/usr/bin/env bash
# dbt for analysts, with the committed profile: `scripts/analyst_dbt.sh run` (what the
# Makefile's dbt-* targets call). On the embedded Derby metastore (target `local`) it
# holds the lock that every lakehouse command starting Spark holds
# (pyspark_jobs/locks.py): Derby admits one JVM, so one of them is refused at once with
# exit 3 instead of failing deep in Hive's client. A shared metastore (target `thrift`)
# needs no lock.
set -euo pipefail
cd "$(dirname "$0")/.."
dbt=.venv/bin/dbt
if [ "${LAKEHOUSE_DBT_TARGET:-local}" != local ]; then
  exec "$dbt" "$@" --profiles-dir .
fi
lock="${LAKEHOUSE_ROOT:-lake}/_state/locks/metastore.lock"
mkdir -p "$(dirname "$lock")"
exec 9<>"$lock"
if ! flock --nonblock 9; then
  holder=$(head -c 64 "$lock" || true)
  echo "dbt: a process on this lake's embedded metastore is already running (pid ${holder:-unknown}, lock $lock); the embedded Derby metastore admits one Spark process at a time: wait for it, or use a shared metastore (docs/deploy.md)" >&2
  exit 3
fi
echo $$ >"$lock"
# dbt starts a driver JVM of its own (the profile passes this variable to it): let it map
# the class-data-sharing archive the lakehouse commands map (docs/operations.md).
archive=$(.venv/bin/python -m pyspark_jobs.jvm_archive --options)
export LAKEHOUSE_DRIVER_JAVA_OPTIONS="${LAKEHOUSE_DRIVER_JAVA_OPTIONS:-} $archive"
exec "$dbt" "$@" --profiles-dir .
