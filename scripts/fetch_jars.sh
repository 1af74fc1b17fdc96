#!/usr/bin/env bash
# Fetch the JVM jars Spark needs (Delta Lake, the Kafka source) from Maven Central once,
# into .cache/jars, and put them on the venv's Spark classpath (pyspark/jars) so that every
# SparkSession of this venv -- jobs, tests and an analyst's own `dbt run` -- has them
# without downloading anything at run time.
#
# Delta's Maven release for this Spark line is 4.4.0; the delta-spark 4.4.1 wheel on PyPI is
# the Python API only and works with it.
# Fetched with `mvn dependency:copy` (no transitive deps: Spark already ships Scala, etc.).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
JARS_DIR=.cache/jars
ARTIFACTS=(
  io.delta:delta-spark_4.2_2.13:4.4.0
  io.delta:delta-storage:4.4.0
  org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0
  # 4.0.0 is the newest token-provider release Maven Central serves; its two classes are
  # unchanged API for the 4.2 Kafka source.
  org.apache.spark:spark-token-provider-kafka-0-10_2.13:4.0.0
  org.apache.kafka:kafka-clients:3.9.2
  org.apache.commons:commons-pool2:2.13.1
)
mkdir -p "$JARS_DIR"
for artifact in "${ARTIFACTS[@]}"; do
  IFS=: read -r group name version <<<"$artifact"
  jar="$JARS_DIR/$name-$version.jar"
  if [ ! -s "$jar" ]; then
    echo "fetching $artifact"
    mvn -q -B dependency:copy -Dartifact="$artifact" -DoutputDirectory="$JARS_DIR" >/dev/null
  fi
done
spark_jars=$("$VENV/bin/python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
for jar in "$JARS_DIR"/*.jar; do
  cp -f "$jar" "$spark_jars/"
done
echo "jars ready in $JARS_DIR"
