#!/usr/bin/env bash
# scripts/java-allocate-golden.sh [OUT_PATH] [SEED]
#
# Regenerates tests/data/allocate_java.jsonl (or OUT_PATH): the queue assignments of the REAL Java
# allocation strategies of org.apache.rocketmq:rocketmq-client 5.3.3 (AVG, AVG_BY_CIRCLE,
# CONSISTENT_HASH, MACHINE_ROOM, CONFIG) on a deterministic, seeded set of scenarios, one JSON object
# per (scenario, strategy, current cid). tests/allocate_parity.rs replays every line through
# rocketmq_push_core::rebalance::AllocateStrategy and requires identical results. The generator and
# the line format are documented in tests/java/src/main/java/rmqtest/AllocateGolden.java. Output is
# byte-for-byte reproducible for a seed (default: the generator's DEFAULT_SEED); the generator fails
# rather than write more than 2 MB. No broker or name server is needed.
#
# Uses the same Maven project (tests/java/pom.xml) and the same build directory as
# scripts/java-producer.sh: <repo>/target/java-producer/ (build/classes + lib/*.jar), built once and
# rebuilt only when tests/java/pom.xml or a file under tests/java/src is newer than the build; the
# same lock makes concurrent builds (from either script) safe.
#
# Environment: JAVA (default java), MVN (default mvn), RMQ_JAVA_PRODUCER_DIR (default
# <repo>/target/java-producer), RMQ_JAVA_OPTS (extra JVM options).
# Exit status: 0 on success, non-zero on any failure (usage 2).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/java-helpers.sh
source "$SCRIPT_DIR/lib/java-helpers.sh"

if [[ $# -gt 2 ]]; then
  echo "usage: $0 [OUT_PATH] [SEED]" >&2
  exit 2
fi
DATA=${1:-$REPO_ROOT/tests/data/allocate_java.jsonl}
SEED=${2:-}

java_helpers_build

mkdir -p "$OUT/logs" "$(dirname "$DATA")"
# The strategies log (INFO) when the current cid is not in cidAll; keep that out of the terminal.
# shellcheck disable=SC2086
exec "$JAVA" -Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
  -Drocketmq.client.logUseSlf4j=false -Drocketmq.log.level=WARN -Drocketmq.client.logLevel=WARN \
  -Drocketmq.log.root="$OUT/logs" -Drocketmq.client.logRoot="$OUT/logs" \
  -Drmq.logback.configurationFile=rmq.client.logback.xml \
  ${RMQ_JAVA_OPTS:-} \
  -cp "$OUT/build/classes:$OUT/lib/*" rmqtest.AllocateGolden "$DATA" ${SEED:+"$SEED"}
