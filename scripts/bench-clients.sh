#!/usr/bin/env bash
# scripts/bench-clients.sh [COUNT] [BODY_BYTES]
#
# Every client side by side on the running broker (scripts/rocketmq.sh start; NAMESRV_ADDR), in one
# invocation:
#   raw        the raw-pull ceiling: one connection, a pull of 32 in flight per queue, our codec,
#              nothing else (`rmqcat bench --adapter raw`)
#   tokio, blocking, async-std, smol   this project's adapters (`rmqcat bench --adapter …`)
#   tokio1     the tokio adapter on a runtime of one worker thread (the others: two)
#   java       Java's DefaultMQPushConsumer 5.3.3 (tests/java ConsumeBench)
#   tokio-pop, java-pop   the same with the group switched to POP first (`rmqcat group mode`;
#              Java with clientRebalance=false, which it needs to pop)
#   go         rocketmq-client-go v2's push consumer (tests/go/consume_bench; skipped without go)
#
# Throughput: COUNT messages (default 300000, BODY_BYTES 100) in a fresh topic with 8 queues; each
# client consumes all of them as a new group from the first offset with Java's defaults and a
# listener that only counts (no clock read: the raw loop's listener runs once per pull of 32, the
# clients' once per message, so a clock read per call would charge the clients 32 times more).
# ROUNDS rounds (default 3), each in a rotated order (the first read of fresh messages may hit
# the disk). Per run: time from start to the last message, msg/s, CPU
# seconds per million messages (GNU time user+sys, whole process), peak RSS, context switches.
#
# Latency: for each client a fresh topic, the consumer started first, then RATE messages a second
# (default 5000) for LAT_SECS seconds (default 20) produced while it runs; born-to-listener p50 and
# p99 as each client reports it.
#
# LAT_WARMUP (default 25) is how many seconds the consumer runs before the first message is born
# (Java needs about that long to take its queues; with 8 its p50 was 5.5 s, start-up not latency).
# WARMUP (default 3) is how many uncounted reads of the whole topic (by the raw loop) come first: a
# broker just started serves its first reads up to 2.5x slower while it warms (seen: raw 2230 ->
# 903 ms over five rounds, and 1533 -> 669 ms over eight reads after one warm-up read), which skews
# whichever client the rotation puts early; a broker started long before needs fewer.
# CLIENTS="raw tokio …" picks clients; SKIP_LATENCY=1 skips the latency part. A/B against an
# earlier build: BASE_RMQCAT=path/to/its/rmqcat, and clients base-tokio, base-blocking, … run it.
# The load average is printed at the start and the end: the machine is shared, so compare
# ratios within one run.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/java-helpers.sh
source "$SCRIPT_DIR/lib/java-helpers.sh"
COUNT=${1:-300000}
SIZE=${2:-100}
ROUNDS=${ROUNDS:-3}
RATE=${RATE:-5000}
LAT_SECS=${LAT_SECS:-20}
: "${NAMESRV_ADDR:?start the broker first: scripts/rocketmq.sh start; eval \"\$(scripts/rocketmq.sh env)\"}"

java_helpers_build
cd "$REPO_ROOT"
cargo build -q --release -p rmqcat
RMQCAT=$REPO_ROOT/target/release/rmqcat
GO_BENCH=$REPO_ROOT/target/go/consume_bench
default_clients="raw tokio blocking async-std smol java"
if command -v go >/dev/null; then
  (cd tests/go/consume_bench && go build -o "$GO_BENCH" .)
  default_clients="$default_clients go"
else
  echo "go not found: the Go client is skipped" >&2
fi
read -r -a clients <<<"${CLIENTS:-$default_clients}"
mkdir -p "$OUT/logs"

# Sets `cmd` to the command that consumes COUNT messages of TOPIC as GROUP and prints one JSON line
# with "ms" (and, given "latency", "p50_ms"/"p99_ms": the listener then reads the clock on
# every call; without, every client's listener only counts).
client_cmd() { # CLIENT TOPIC GROUP COUNT [latency]
  local client=$1 topic=$2 group=$3 count=$4 latency=${5:-}
  local flag=()
  [[ -n $latency ]] && flag=(--latency)
  if [[ $client == *-pop ]]; then
    # Untimed: the operator's switch, before the consumer starts.
    "$RMQCAT" group mode -q -n "$NAMESRV_ADDR" -g "$group" -t "$topic" pop >/dev/null
  fi
  case $client in
  java | java-pop)
    cmd=("$JAVA" -Xms64m -Xmx512m -Drocketmq.client.logUseSlf4j=false -Drocketmq.log.level=WARN
      -Drocketmq.client.logLevel=WARN -Drocketmq.log.root="$OUT/logs" -Drocketmq.client.logRoot="$OUT/logs"
      -cp "$OUT/build/classes:$OUT/lib/*" rmqtest.ConsumeBench "$NAMESRV_ADDR" "$topic" "$group" "$count")
    if [[ $client == java-pop ]]; then cmd+=(pop); fi
    if [[ -n $latency ]]; then cmd+=(latency); fi
    ;;
  go)
    cmd=("$GO_BENCH" "$NAMESRV_ADDR" "$topic" "$group" "$count")
    if [[ -n $latency ]]; then cmd+=(latency); fi
    ;;
  base-*)
    [[ -x ${BASE_RMQCAT:-} ]] || { echo "$client needs BASE_RMQCAT (an earlier build's rmqcat)" >&2; exit 2; }
    local base=${client#base-}
    # A build from before --latency records latency always and knows no flag.
    "$BASE_RMQCAT" bench --help | grep -q -- --latency || flag=()
    cmd=("$BASE_RMQCAT" bench -n "$NAMESRV_ADDR" -t "$topic" -g "$group" -c "$count" --adapter "${base%-pop}" --json "${flag[@]}")
    ;;
  *)
    local adapter=("--adapter" "$client")
    [[ $client == tokio1 ]] && adapter=(--adapter tokio --tokio-workers 1)
    if [[ $client == *-pop ]]; then adapter=("--adapter" "${client%-pop}"); fi
    cmd=("$RMQCAT" bench -n "$NAMESRV_ADDR" -t "$topic" -g "$group" -c "$count" "${adapter[@]}" --json "${flag[@]}")
    ;;
  esac
}

json_field() { # NAME FILE
  sed -n "s/.*\"$1\":\\([0-9.-]*\\).*/\\1/p" "$2" | head -1
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stamp=$(date +%s%N)
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"

# --- throughput -----------------------------------------------------------------------------------
topic="bench_clients_$stamp"
"$RMQCAT" produce -q -n "$NAMESRV_ADDR" -t "$topic" --create 8 --count "$COUNT" --size "$SIZE"
printf '\n%s messages of %s B over 8 queues, each client a new group from the first offset\n' "$COUNT" "$SIZE"
# first: ms until the first message reached the listener (start-up; rmqcat's clients only).
printf '%-5s %-9s %8s %10s %9s %8s %9s %7s\n' round client ms msg/s "CPU-s/M" "RSS MiB" switches first
results=$tmp/throughput
: >"$results"
for w in $(seq "${WARMUP:-3}"); do
  [[ $w -gt 0 ]] || continue
  "$RMQCAT" bench -n "$NAMESRV_ADDR" -t "$topic" -g "warmup_${stamp}_$w" -c "$COUNT" --adapter raw --json >/dev/null
done
n=${#clients[@]}
for round in $(seq "$ROUNDS"); do
  for i in $(seq 0 $((n - 1))); do
    client=${clients[$(((i + round - 1) % n))]}
    out=$tmp/out
    client_cmd "$client" "$topic" "${client}_${stamp}_$round" "$COUNT"
    if ! /usr/bin/time -f "%U %S %M %c %w" -o "$tmp/time" "${cmd[@]}" >"$out" 2>"$tmp/err"; then
      echo "$client failed: $(tail -3 "$tmp/err")" >&2
      continue
    fi
    ms=$(json_field ms "$out")
    first=$(json_field first_ms "$out")
    read -r user sys rss invol vol <"$tmp/time"
    cpu_m=$(awk -v u="$user" -v s="$sys" -v c="$COUNT" 'BEGIN { printf "%.2f", (u + s) * 1e6 / c }')
    switches=$((invol + vol))
    echo "$client $ms $cpu_m $rss $switches $round ${first:--}" >>"$results"
    printf '%-5s %-9s %8s %10s %9s %8s %9s %7s\n' "$round" "$client" "$ms" "$((COUNT * 1000 / ms))" \
      "$cpu_m" "$((rss / 1024))" "$switches" "${first:--}"
  done
done

printf '\nmedians over %s rounds, and against the raw-pull ceiling\n' "$ROUNDS"
# speed/raw is the ratio of the medians; per round, the median of each round's raw ms / client
# ms: a client against the raw loop of its own round, minutes of the machine's drift apart less.
# first: the median start-up; after first: as "per round", with both clients' start-up taken
# off (the ratio once both consume).
printf '%-9s %8s %10s %9s %8s %9s %10s %10s %10s %7s %11s\n' client ms msg/s "CPU-s/M" "RSS MiB" switches "speed/raw" "per round" "CPU/raw" first "after first"
awk -v count="$COUNT" -v rounds="$ROUNDS" '
  # Insertion sort: mawk has no asort.
  function median(list,   a, i, j, t, m) {
    m = split(list, a, " ")
    for (i = 2; i <= m; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  { order[$1] = order[$1] ? order[$1] : ++seen; ms[$1] = ms[$1] " " $2; cpu[$1] = cpu[$1] " " $3; rss[$1] = rss[$1] " " $4; sw[$1] = sw[$1] " " $5
    at[$1, $6] = $2; if ($7 != "-" && $7 != "") { fst[$1] = fst[$1] " " $7; fat[$1, $6] = $7 } }
  END {
    rms = median(ms["raw"]); rcpu = median(cpu["raw"])
    for (c in order) names[order[c]] = c
    for (i = 1; i <= seen; i++) {
      c = names[i]; m = median(ms[c]); p = median(cpu[c]); per = ""
      steady = ""
      for (r = 1; r <= rounds; r++) if (at["raw", r] && at[c, r]) per = per " " at["raw", r] / at[c, r]
      for (r = 1; r <= rounds; r++) if ((("raw", r) in fat) && ((c, r) in fat) && at[c, r] > fat[c, r])
        steady = steady " " (at["raw", r] - fat["raw", r]) / (at[c, r] - fat[c, r])
      printf "%-9s %8d %10d %9.2f %8d %9d %10s %10s %10s %7s %11s\n", c, m, count * 1000 / m, p, median(rss[c]) / 1024, median(sw[c]),
        rms ? sprintf("%.2fx", rms / m) : "-", per != "" ? sprintf("%.2fx", median(per)) : "-", rcpu ? sprintf("%.2fx", p / rcpu) : "-",
        fst[c] != "" ? sprintf("%.1f", median(fst[c])) : "-", steady != "" ? sprintf("%.2fx", median(steady)) : "-"
    }
  }' "$results"

# --- latency --------------------------------------------------------------------------------------
if [[ -z ${SKIP_LATENCY:-} ]]; then
  lat_count=$((RATE * LAT_SECS))
  printf '\nborn-to-listener latency: %s msg/s for %s s (%s messages), consumer started first\n' "$RATE" "$LAT_SECS" "$lat_count"
  printf '%-9s %8s %8s\n' client p50_ms p99_ms
  for client in "${clients[@]}"; do
    topic="bench_latency_${client}_$stamp"
    "$RMQCAT" produce -q -n "$NAMESRV_ADDR" -t "$topic" --create 8 --count 0
    client_cmd "$client" "$topic" "lat_${client}_$stamp" "$lat_count" latency
    "${cmd[@]}" >"$tmp/lat" 2>"$tmp/err" &
    pid=$!
    # Let the consumer find the topic and take its queues before the first message is born.
    sleep "${LAT_WARMUP:-25}"
    "$RMQCAT" produce -q -n "$NAMESRV_ADDR" -t "$topic" --count "$lat_count" --size "$SIZE" --rate "$RATE"
    if wait "$pid"; then
      printf '%-9s %8s %8s\n' "$client" "$(json_field p50_ms "$tmp/lat")" "$(json_field p99_ms "$tmp/lat")"
    else
      echo "$client failed: $(tail -3 "$tmp/err")" >&2
    fi
  done
fi
echo
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
