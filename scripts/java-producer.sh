#!/usr/bin/env bash
# scripts/java-producer.sh NAMESRV TOPIC MANIFEST_PATH [ZLIB|LZ4|ZSTD]
#
# Runs the real Java RocketMQ producer in tests/java (org.apache.rocketmq:rocketmq-client 5.3.3, the
# remoting client) against NAMESRV. It sends a fixed set of 6 messages to queue 0 of TOPIC and
# writes one JSON object per message to MANIFEST_PATH (see tests/java/src/main/java/rmqtest/Produce.java).
# The topic should exist already (e.g. created with 8 queues: scripts/rocketmq.sh admin updateTopic
# -b 127.0.0.1:10911 -t TOPIC -r 8 -w 8, or code 17 from Rust); otherwise the broker auto-creates it
# with 4 queues. Use a fresh topic per run: queue offsets in the manifest are absolute (0..5 only
# on a fresh topic), and two runs on one topic may interleave.
#
# Manifest: one JSON object per message, in queue order: small (TagA, keys "k1 k2", color=red,
# unicode=中文😀, "hello"), big (6000 B text, tags Big, compressed), random (5000 B from
# Random(42), no tags, compressed too since >= 4096 B), then a 3-message batch (B0..B2, batch-i,
# idx=i, never compressed). Fields: see the comment at the top of Produce.java. Note "msgId" is the
# producer's per-message UNIQ_KEY, while "consumerMsgId" is what a Java consumer reports: for the
# batch messages the broker appends the batch's own UNIQ_KEY after each message's, and the last one
# wins, so all three batch messages have the same consumerMsgId. "javaView" is each message read back
# from the broker (VIEW_MESSAGE_BY_ID) as decoded by the Java client, including all properties.
#
# Builds once into <repo>/target/java-producer/ (build/classes + lib/*.jar); the build is skipped
# while it is newer than tests/java/pom.xml and every file under tests/java/src. A lock makes
# concurrent first calls safe.
#
# Environment: JAVA (default java), MVN (default mvn), RMQ_JAVA_PRODUCER_DIR (default
# <repo>/target/java-producer), RMQ_JAVA_OPTS (extra JVM options; -Drmqtest.namespace=NS gives the
# producer Java's namespace NS).
# Exit status: 0 on success, non-zero on any failure (usage 2).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/java-helpers.sh
source "$SCRIPT_DIR/lib/java-helpers.sh"

if [[ $# -lt 3 || $# -gt 4 ]]; then
  echo "usage: $0 NAMESRV TOPIC MANIFEST_PATH [ZLIB|LZ4|ZSTD]" >&2
  exit 2
fi
NAMESRV=$1 TOPIC=$2 MANIFEST=$3
CT=$(tr '[:lower:]' '[:upper:]' <<<"${4:-ZLIB}")
case "$CT" in ZLIB | LZ4 | ZSTD) ;; *) echo "compress type must be ZLIB, LZ4 or ZSTD, got $CT" >&2; exit 2 ;; esac

java_helpers_build

mkdir -p "$OUT/logs"
# shellcheck disable=SC2086
exec "$JAVA" -Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
  -Drocketmq.message.compressType="$CT" \
  -Drocketmq.client.logUseSlf4j=false -Drocketmq.log.level=WARN -Drocketmq.client.logLevel=WARN \
  -Drocketmq.log.root="$OUT/logs" -Drocketmq.client.logRoot="$OUT/logs" \
  -Drmq.logback.configurationFile=rmq.client.logback.xml \
  ${RMQ_JAVA_OPTS:-} \
  -cp "$OUT/build/classes:$OUT/lib/*" rmqtest.Produce "$NAMESRV" "$TOPIC" "$MANIFEST" "$CT"
