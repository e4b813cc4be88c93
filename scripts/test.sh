#!/usr/bin/env bash
# The project's test command (README "Test"): every test, with a real Apache RocketMQ broker.
#
#   1. starts a name server and broker 5.3.3 (scripts/rocketmq.sh) and runs `cargo test` for the
#      whole workspace with RMQ_REQUIRE_BROKER=1, so a missing broker fails instead of skipping;
#   2. runs the chaos suite's bounded version (scripts/chaos.sh smoke: its own clusters on other
#      ports, killed and restarted; SKIP_CHAOS=1 skips it) and, alongside it, the differential
#      suite against Java on the broker of step 1 (left out of step 1's cargo test);
#   3. restarts on the 4.9.x broker (4.9.7: the 4.9.8 server jars are not on Maven Central) and runs
#      the wire suite again (SKIP_V4=1 skips this step);
#   4. runs the suites on secured brokers, ACL (4.9.x and 5.3.x) and TLS (enforcing, permissive,
#      enforcing with ACL): scripts/secured.sh smoke, rmqcat's ACL and TLS tests whole and one
#      e2e scenario per adapter (POP too by tokio) in each; SECURED=full runs the whole e2e suite
#      in each setup, as scripts/secured.sh does alone (SKIP_SECURED=1 skips this step);
#   5. restarts 5.3.3 with two name servers (RMQ_NAMESRVS=2) and runs rmqcat's fail-over test:
#      either name server stopped under a running consumer and before new ones start
#      (SKIP_NS2=1 skips);
#   6. stops the broker whatever happens.
#
# Extra arguments go to the first `cargo test` (e.g. scripts/test.sh -- --nocapture).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

started=""
cleanup() { [[ -n $started ]] && scripts/rocketmq.sh stop >/dev/null 2>&1 || true; }
trap cleanup EXIT
# Each step's start, in seconds since the script began (CI keeps the whole run under 45 min).
# With the disk in use: above 90% the broker refuses every send (scripts/rocketmq.sh, fact 23).
disk() { df -P -k . | awk 'NR == 2 { t = $3 + $4; if (t <= 0) t = 1; printf "disk %d%% used", ($3 * 100 + t - 1) / t }'; }
step() { printf '\n---- test.sh: %s (%ss, %s)\n' "$*" "$SECONDS" "$(disk)"; }

step "cargo test on 5.3.3"
scripts/rocketmq.sh start 5.3.3
started=1
eval "$(scripts/rocketmq.sh env)"
export RMQ_REQUIRE_BROKER=1
cargo test --workspace --all-features --exclude rocketmq-push-oracle "$@"

# The differential suite (Java as the oracle, on this broker) mostly waits for JVMs and for
# both consumers to settle, as the chaos smoke (clusters of its own, on other ports) waits
# out its faults: they run side by side. The oracle's test binaries run directly, so the two
# do not queue on cargo's build lock.
if [[ ${SKIP_CHAOS:-0} != 1 ]]; then
  step "chaos smoke, and the differential suite alongside"
  cargo test --all-features -p rocketmq-push-chaos --no-run
  mapfile -t oracle_bins < <(cargo test --all-features -p rocketmq-push-oracle --no-run \
    --message-format=json-render-diagnostics | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p')
  ((${#oracle_bins[@]})) || { echo "no test binaries of rocketmq-push-oracle"; exit 1; }
  (cd adapters/oracle && for b in "${oracle_bins[@]}"; do "$b" || exit 1; done) > target/oracle-tests.log 2>&1 &
  oracle=$!
  chaos=0
  scripts/chaos.sh smoke || chaos=$?
  oracle_rc=0
  wait "$oracle" || oracle_rc=$?
  cat target/oracle-tests.log
  ((oracle_rc == 0)) || { echo "the differential suite failed (above)"; exit 1; }
  ((chaos == 0)) || { echo "the chaos smoke failed (above)"; exit 1; }
else
  step "differential suite"
  cargo test --all-features -p rocketmq-push-oracle
fi

if [[ ${SKIP_V4:-0} != 1 ]]; then
  step "wire suite on 4.9.x"
  scripts/rocketmq.sh stop
  scripts/rocketmq.sh start 4.9.8
  eval "$(scripts/rocketmq.sh env)"
  cargo test --all-features --test broker_wire --test broker_pop
fi

if [[ ${SKIP_SECURED:-0} != 1 ]]; then
  step "secured setups (${SECURED:-smoke})"
  scripts/secured.sh "${SECURED:-smoke}"
fi

if [[ ${SKIP_NS2:-0} != 1 ]]; then
  step "two name servers"
  scripts/rocketmq.sh stop
  # Plain, whatever RMQ_ACL or RMQ_TLS the caller's environment holds (`start` reads them).
  RMQ_ACL=0 RMQ_TLS=off RMQ_NAMESRVS=2 scripts/rocketmq.sh start 5.3.3
  eval "$(scripts/rocketmq.sh env)"
  cargo test --all-features -p rmqcat --test failover
fi
step "done"
