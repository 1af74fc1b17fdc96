#!/usr/bin/env bash
# Resolve the JVM packages Spark needs (Delta Lake, the Kafka source, PostgreSQL's JDBC
# driver for a shared metastore) by their Maven coordinates, once, into the project's Ivy
# cache (.cache/ivy), with Spark's own resolver: `python -m pyspark_jobs.jars`, where the
# coordinates are listed. Every session of the project then takes the resolved jars from
# there (spark.jars), and a cluster takes the same coordinates (spark.jars.packages with
# spark.jars.ivy on this cache): nothing downloads at run time.
#
# Earlier set-ups copied these jars into the venv's pyspark/jars, which a cluster's
# executors never see; those copies are removed, so that every session proves it gets its
# jars from the settings.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
SPARK_LOCAL_IP=${SPARK_LOCAL_IP:-127.0.0.1} "$VENV/bin/python" -m pyspark_jobs.jars
spark_jars=$("$VENV/bin/python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
for old in delta-spark_4.2_2.13-4.4.0.jar delta-storage-4.4.0.jar \
    spark-sql-kafka-0-10_2.13-4.2.0.jar spark-token-provider-kafka-0-10_2.13-4.0.0.jar \
    kafka-clients-3.9.2.jar commons-pool2-2.13.1.jar; do
  rm -f "$spark_jars/$old"
done
