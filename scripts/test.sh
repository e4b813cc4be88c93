#!/usr/bin/env bash
# The project's test command (README "Test"): every test, with a real Apache RocketMQ broker.
#
#   1. starts a name server and broker 5.3.3 (scripts/rocketmq.sh) and runs `cargo test` for the
#      whole workspace with RMQ_REQUIRE_BROKER=1, so a missing broker fails instead of skipping;
#   2. runs the chaos suite's bounded version (scripts/chaos.sh smoke: its own clusters on other
#      ports, killed and restarted; SKIP_CHAOS=1 skips it);
#   3. restarts on the 4.9.x broker (4.9.7: the 4.9.8 server jars are not on Maven Central) and runs
#      the wire suite again (SKIP_V4=1 skips this step);
#   4. stops the broker whatever happens.
#
# Extra arguments go to the first `cargo test` (e.g. scripts/test.sh -- --nocapture).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

started=""
cleanup() { [[ -n $started ]] && scripts/rocketmq.sh stop >/dev/null 2>&1 || true; }
trap cleanup EXIT

scripts/rocketmq.sh start 5.3.3
started=1
eval "$(scripts/rocketmq.sh env)"
export RMQ_REQUIRE_BROKER=1
cargo test --workspace --all-features "$@"

if [[ ${SKIP_CHAOS:-0} != 1 ]]; then
  scripts/chaos.sh smoke
fi

if [[ ${SKIP_V4:-0} != 1 ]]; then
  scripts/rocketmq.sh stop
  scripts/rocketmq.sh start 4.9.8
  eval "$(scripts/rocketmq.sh env)"
  cargo test --all-features --test broker_wire
fi
