#!/usr/bin/env bash
# scripts/bench-vs-java.sh [COUNT] [BODY_BYTES]
# (ROUNDS=n repeats the pair on the same messages; RUST_FIRST_PARITY=1 lets rust read first in odd rounds)
#
# Side by side on the running broker (scripts/rocketmq.sh start; NAMESRV_ADDR): produce COUNT
# messages (default 200000, 100-byte bodies) into a fresh topic with 8 queues, then let each client
# consume all of them as a new group from the first offset, with the same defaults and a listener
# that only counts — Java's DefaultMQPushConsumer 5.3.3 (tests/java ConsumeBench) and this
# project's tokio adapter (examples/bench_consume.rs). Prints a table: time from start to the last
# message, messages per second, peak RSS (GNU time), and the ratios of each round. Both read the
# same stored messages from the same broker, so the broker's serving rate bounds both; rounds
# alternate who reads first, since the first read of fresh messages may hit the disk.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/java-helpers.sh
source "$SCRIPT_DIR/lib/java-helpers.sh"
COUNT=${1:-200000}
SIZE=${2:-100}
: "${NAMESRV_ADDR:?start the broker first: scripts/rocketmq.sh start; eval \"\$(scripts/rocketmq.sh env)\"}"

java_helpers_build
cd "$REPO_ROOT"
cargo build -q --release -p rmqcat -p rocketmq-push-tokio --example bench_consume

stamp=$(date +%s%N)
topic="bench_vs_java_$stamp"
target/release/rmqcat produce -q -n "$NAMESRV_ADDR" -t "$topic" --create 8 --count "$COUNT" --size "$SIZE"

measure() { # NAME COMMAND… → "ms rss_kib"
  local name=$1
  shift
  local tmp
  tmp=$(mktemp)
  /usr/bin/time -f "%M" -o "$tmp.rss" "$@" >"$tmp.out"
  local ms
  ms=$(sed -n 's/.*"ms":\([0-9]*\).*/\1/p' "$tmp.out")
  echo "$name $ms $(cat "$tmp.rss")"
  rm -f "$tmp" "$tmp.out" "$tmp.rss"
}

mkdir -p "$OUT/logs"
printf '%s messages of %s B over 8 queues, each client a new group from the first offset\n' "$COUNT" "$SIZE"
printf '%-6s %-8s %10s %12s %10s\n' round client ms msg/s "RSS MiB"
for round in $(seq "${ROUNDS:-1}"); do
  # Alternate who reads first: the first read of fresh messages may come from disk.
  if ((round % 2 == ${RUST_FIRST_PARITY:-0})); then
    rust_line=$(measure rust target/release/examples/bench_consume "$NAMESRV_ADDR" "$topic" "rust_${stamp}_$round" "$COUNT")
  fi
  java_line=$(measure java "$JAVA" -Xms64m -Xmx512m \
    -Drocketmq.client.logUseSlf4j=false -Drocketmq.log.level=WARN -Drocketmq.client.logLevel=WARN \
    -Drocketmq.log.root="$OUT/logs" -Drocketmq.client.logRoot="$OUT/logs" \
    -cp "$OUT/build/classes:$OUT/lib/*" rmqtest.ConsumeBench "$NAMESRV_ADDR" "$topic" "java_${stamp}_$round" "$COUNT")
  if ((round % 2 != ${RUST_FIRST_PARITY:-0})); then
    rust_line=$(measure rust target/release/examples/bench_consume "$NAMESRV_ADDR" "$topic" "rust_${stamp}_$round" "$COUNT")
  fi
  read -r _ jms jrss <<<"$java_line"
  read -r _ rms rrss <<<"$rust_line"
  for row in "java $jms $jrss" "rust $rms $rrss"; do
    read -r n ms rss <<<"$row"
    printf '%-6s %-8s %10s %12s %10s\n' "$round" "$n" "$ms" "$((COUNT * 1000 / ms))" "$((rss / 1024))"
  done
  awk -v jms="$jms" -v rms="$rms" -v jr="$jrss" -v rr="$rrss" \
    'BEGIN { printf "       rust/java: %.2fx the throughput, %.2fx the memory\n", jms / rms, rr / jr }'
done
