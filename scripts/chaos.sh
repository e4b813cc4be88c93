#!/usr/bin/env bash
# scripts/chaos.sh [smoke|full]: the chaos suite against real RocketMQ 5.3.3 clusters of its own
# (name server 19876, brokers from 20911, state in target/rocketmq-chaos; scripts/rocketmq.sh
# starts, kills and restarts them), with the consumer as a process of its own under steady load:
# consumer kill -9 and SIGTERM (x10 in full), broker kill -9 and restart (x3), a TCP fault proxy
# (black hole, stall, refuse, random cuts, resets), two masters with one killed for 40 s, and a
# master with a slave where the master dies. Prints one table row per scenario (the figures in
# tests/README.md). Default: full (about 15 minutes). CI runs `smoke` from scripts/test.sh.
#
# CHAOS_ONLY=word runs only the scenarios whose name contains it (kill9, sigterm, broker, proxy,
# masters, slave).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mode=${1:-full}
scripts/rocketmq.sh fetch 5.3.3 >/dev/null
echo "chaos suite ($mode), load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
RMQ_CHAOS=$mode cargo test --all-features -p rocketmq-push-chaos --test chaos -- --nocapture --test-threads 1
