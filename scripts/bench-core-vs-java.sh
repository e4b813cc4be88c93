#!/usr/bin/env bash
# scripts/bench-core-vs-java.sh: the core's hot pieces against Java's, same inputs, one run, one
# after the other on this machine:
#   - decoding a pull body (32 messages of 1 KiB with the properties a 5.3.3 broker stores), alone
#     and with each message's id and tags read, against MessageDecoder.decodesBatch + getMsgId/getTags;
#   - ProcessQueue put / out-of-order ack / offset to commit, against Java's ProcessQueue.
# Prints criterion's figures for ours and Java's warmed-loop rounds, with the load at the start.
set -euo pipefail
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/java-helpers.sh
source "$SCRIPT_DIR/lib/java-helpers.sh"
java_helpers_build
cd "$REPO_ROOT"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
RMQ_BENCH_BODY_OUT=$dir cargo bench -q --bench codec -- pull_body_32x1KiB/decode 2>&1 | grep -E "^pull_body|time:|thrpt:"
"$JAVA" -Xms256m -Xmx256m -cp "$OUT/build/classes:$OUT/lib/*" rmqtest.DecodeBench "$dir/pull_body_32x1KiB.bin" 2>/dev/null
cargo bench -q --bench consumer -- process_queue 2>&1 | grep -E "^process_queue|time:|thrpt:"
"$JAVA" -Xms256m -Xmx256m -cp "$OUT/build/classes:$OUT/lib/*" rmqtest.PqBench 2>/dev/null
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
