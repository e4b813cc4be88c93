#!/usr/bin/env bash
# scripts/java-acl-golden.sh [OUT_PATH]
#
# Regenerates tests/data/acl_java.txt (or OUT_PATH): requests signed by the REAL Java client's
# AclClientRPCHook (org.apache.rocketmq:rocketmq-client 5.3.3), one per line with the secret, the
# body and every ext field Java sent (format in tests/java/src/main/java/rmqtest/AclGolden.java).
# tests/acl_signature.rs signs the same requests with ours and requires the same fields, signature
# included, byte for byte. No broker or name server is needed.
#
# Builds the Java helpers as scripts/java-producer.sh does (target/java-producer, rebuilt when
# tests/java changes). Environment: JAVA, MVN, RMQ_JAVA_PRODUCER_DIR, RMQ_JAVA_OPTS.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/java-helpers.sh
source "$SCRIPT_DIR/lib/java-helpers.sh"

if [[ $# -gt 1 ]]; then
  echo "usage: $0 [OUT_PATH]" >&2
  exit 2
fi
DATA=${1:-$REPO_ROOT/tests/data/acl_java.txt}

java_helpers_build

mkdir -p "$OUT/logs" "$(dirname "$DATA")"
# shellcheck disable=SC2086
exec "$JAVA" -Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
  -Drocketmq.client.logUseSlf4j=false -Drocketmq.log.level=WARN -Drocketmq.client.logLevel=WARN \
  -Drocketmq.log.root="$OUT/logs" -Drocketmq.client.logRoot="$OUT/logs" \
  -Drmq.logback.configurationFile=rmq.client.logback.xml \
  ${RMQ_JAVA_OPTS:-} \
  -cp "$OUT/build/classes:$OUT/lib/*" rmqtest.AclGolden "$DATA"
