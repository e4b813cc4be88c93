#!/usr/bin/env bash
# scripts/java-oracle.sh key=value...: Java's DefaultMQPushConsumer as the differential suite's
# oracle (tests/java OracleConsume): one JSON line per message its listener sees on stdout,
# "started"/"stopped" on stderr, a graceful shutdown when stdin says "stop". Builds the Java
# helpers on first use (Maven). Java's own logs go to target/java-producer/logs.
set -euo pipefail
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/java-helpers.sh
source "$SCRIPT_DIR/lib/java-helpers.sh"
java_helpers_build
mkdir -p "$OUT/logs"
exec "$JAVA" -Xms64m -Xmx256m \
  -Drocketmq.client.logUseSlf4j=false -Drocketmq.log.level=WARN -Drocketmq.client.logLevel=WARN \
  -Drocketmq.log.root="$OUT/logs" -Drocketmq.client.logRoot="$OUT/logs" \
  ${RMQ_ORACLE_JVM_OPTS:-} \
  -cp "$OUT/build/classes:$OUT/lib/*" rmqtest.OracleConsume "$@"
