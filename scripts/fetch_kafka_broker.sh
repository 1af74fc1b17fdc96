#!/usr/bin/env bash
# Fetch a runnable Apache Kafka broker (KRaft mode, no ZooKeeper process) from Maven Central
# into .cache/kafka-broker/, for the integration tests of the Spark Kafka source
# (tests/support/kafka_broker.py). Jars come from `mvn dependency:copy-dependencies` on
# tools/kafka/pom.xml, because Maven Central is reachable where the Apache download mirrors
# (the .tgz distribution) and Docker are not.
#
# Idempotent: a stamp holding the pom's checksum marks a complete fetch; a second run with
# the same pom does nothing. A changed pom refetches into a fresh directory.
set -euo pipefail
cd "$(dirname "$0")/.."
POM=tools/kafka/pom.xml
DEST=.cache/kafka-broker
STAMP=$DEST/.fetched
want=$(sha256sum "$POM" | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  echo "kafka broker jars already in $DEST"
  exit 0
fi
# Fetch into a temp dir and swap it in, so an interrupted run never looks complete.
mkdir -p .cache
tmp=$(mktemp -d .cache/kafka-broker.XXXXXX)
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
echo "fetching kafka broker jars ($POM) into $DEST"
if ! mvn -q -B -f "$POM" dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$PWD/$tmp" >"$tmp/mvn.log" 2>&1; then
  cat "$tmp/mvn.log" >&2
  exit 1
fi
rm -f "$tmp/mvn.log"
echo "$want" >"$tmp/.fetched"
rm -rf "$DEST"
mv "$tmp" "$DEST"
echo "kafka broker jars ready in $DEST ($(ls "$DEST"/*.jar | wc -l) jars)"
