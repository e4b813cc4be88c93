#!/usr/bin/env bash
# scripts/oracle.sh [VERSION]: the differential suite, Java's DefaultMQPushConsumer as the oracle
# (adapters/oracle), with the whole matrix (ORACLE_FULL=1), against a broker this script starts:
# 5.3.3 by default, or 4.9.8 (runs 4.9.7). CI runs the subset on 5.3.3 (scripts/test.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version=${1:-5.3.3}
started=""
cleanup() { [[ -n $started ]] && scripts/rocketmq.sh stop >/dev/null 2>&1 || true; }
trap cleanup EXIT
if ! scripts/rocketmq.sh status >/dev/null 2>&1; then
  scripts/rocketmq.sh start "$version"
  started=1
fi
eval "$(scripts/rocketmq.sh env)"
echo "oracle suite on RocketMQ ${RMQ_SERVER_VERSION:-$version}, load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
RMQ_REQUIRE_BROKER=1 ORACLE_FULL=1 cargo test --all-features -p rocketmq-push-oracle -- --nocapture --test-threads 1
