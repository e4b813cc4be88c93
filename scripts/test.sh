#!/usr/bin/env bash
# The project's test command (README "Test"): every test, with a real Apache RocketMQ broker.
#
#   1. starts a name server and broker 5.3.3 (scripts/rocketmq.sh) and runs `cargo test` for the
#      whole workspace with RMQ_REQUIRE_BROKER=1, so a missing broker fails instead of skipping;
#   2. runs the chaos suite's bounded version (scripts/chaos.sh smoke: its own clusters on other
#      ports, killed and restarted; SKIP_CHAOS=1 skips it);
#   3. restarts on the 4.9.x broker (4.9.7: the 4.9.8 server jars are not on Maven Central) and runs
#      the wire suite again (SKIP_V4=1 skips this step);
#   4. restarts each version with ACL enforced (RMQ_ACL=1: 4.9.x ACL 1.0, 5.3.x ACL 2.0) and runs
#      rmqcat's ACL test and the tokio and blocking adapters' real-broker e2e suite (smol and
#      async-std: one scenario; POP by tokio only), all signed, against each (SKIP_ACL=1 skips
#      this step);
#   5. restarts 5.3.3 with TLS (RMQ_TLS: enforcing, permissive, and enforcing with ACL on too) and
#      runs rmqcat's TLS test in each, and the real-broker e2e suite over TLS (verified against
#      the script's test CA) where TLS is enforced: every adapter, the whole suite (smol and
#      async-std with ACL as well: one scenario; POP by tokio only) (SKIP_TLS=1 skips);
#   6. restarts 5.3.3 with two name servers (RMQ_NAMESRVS=2) and runs rmqcat's fail-over test:
#      either name server stopped under a running consumer and before new ones start
#      (SKIP_NS2=1 skips);
#   7. stops the broker whatever happens.
#
# Extra arguments go to the first `cargo test` (e.g. scripts/test.sh -- --nocapture).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

started=""
cleanup() { [[ -n $started ]] && scripts/rocketmq.sh stop >/dev/null 2>&1 || true; }
trap cleanup EXIT
# Each step's start, in seconds since the script began (CI keeps the whole run under 45 min).
step() { printf '\n---- test.sh: %s (%ss)\n' "$*" "$SECONDS"; }

step "cargo test on 5.3.3"
scripts/rocketmq.sh start 5.3.3
started=1
eval "$(scripts/rocketmq.sh env)"
export RMQ_REQUIRE_BROKER=1
cargo test --workspace --all-features "$@"

if [[ ${SKIP_CHAOS:-0} != 1 ]]; then
  step "chaos smoke"
  scripts/chaos.sh smoke
fi

if [[ ${SKIP_V4:-0} != 1 ]]; then
  step "wire suite on 4.9.x"
  scripts/rocketmq.sh stop
  scripts/rocketmq.sh start 4.9.8
  eval "$(scripts/rocketmq.sh env)"
  cargo test --all-features --test broker_wire
fi

if [[ ${SKIP_ACL:-0} != 1 ]]; then
  for v in 4.9.8 5.3.3; do
    step "ACL on $v"
    scripts/rocketmq.sh stop
    RMQ_ACL=1 scripts/rocketmq.sh start "$v"
    eval "$(scripts/rocketmq.sh env)"
    cargo test --all-features -p rmqcat --test acl
    # The shared e2e suite on the secured broker (both versions), signed with the admin account
    # (it creates topics): the async adapters' run loop and the blocking one, whole.
    ROCKETMQ_ACCESS_KEY=RocketMQ ROCKETMQ_SECRET_KEY=12345678 \
      cargo test --all-features -p rocketmq-push-tokio --test e2e e2e_async_listener_against_the_real_broker
    # The blocking adapter leaves out the POP scenario (17 s): the tokio run above signs the
    # same POP requests, and the blocking adapter pops in the plain run.
    E2E_SKIP=pop ROCKETMQ_ACCESS_KEY=RocketMQ ROCKETMQ_SECRET_KEY=12345678 \
      cargo test --all-features -p rocketmq-push-blocking --test e2e e2e_against_the_real_broker
    # smol and async-std share the tokio adapter's run loop: a smoke subset (one scenario).
    for a in smol async-std; do
      E2E_ONLY="consume 10,000" ROCKETMQ_ACCESS_KEY=RocketMQ ROCKETMQ_SECRET_KEY=12345678 \
        cargo test --all-features -p "rocketmq-push-$a" --test e2e e2e_async_listener_against_the_real_broker
    done
  done
fi

if [[ ${SKIP_TLS:-0} != 1 ]]; then
  for setup in enforcing permissive acl+enforcing; do
    step "TLS $setup"
    acl=0 mode=$setup
    if [[ $setup == acl+* ]]; then acl=1 mode=${setup#acl+}; fi
    scripts/rocketmq.sh stop
    RMQ_ACL=$acl RMQ_TLS=$mode scripts/rocketmq.sh start 5.3.3
    eval "$(scripts/rocketmq.sh env)"
    cargo test --all-features -p rmqcat --test tls
    if [[ $mode == enforcing ]]; then
      creds=()
      [[ $acl == 1 ]] && creds=(ROCKETMQ_ACCESS_KEY=RocketMQ ROCKETMQ_SECRET_KEY=12345678)
      env "${creds[@]}" ROCKETMQ_TLS_CA="$RMQ_TLS_CA" \
        cargo test --all-features -p rocketmq-push-tokio --test e2e e2e_async_listener_against_the_real_broker
      # POP over TLS: the tokio run above; the others leave it out (as in the ACL step).
      env "${creds[@]}" E2E_SKIP=pop ROCKETMQ_TLS_CA="$RMQ_TLS_CA" \
        cargo test --all-features -p rocketmq-push-blocking --test e2e e2e_against_the_real_broker
      # smol and async-std share the tokio adapter's run loop and TLS: the whole suite without
      # ACL, a smoke subset (one scenario) with it.
      only=""
      [[ $acl == 1 ]] && only="consume 10,000"
      for a in smol async-std; do
        env "${creds[@]}" E2E_ONLY="$only" E2E_SKIP=pop ROCKETMQ_TLS_CA="$RMQ_TLS_CA" \
          cargo test --all-features -p "rocketmq-push-$a" --test e2e e2e_async_listener_against_the_real_broker
      done
    fi
  done
fi

if [[ ${SKIP_NS2:-0} != 1 ]]; then
  step "two name servers"
  scripts/rocketmq.sh stop
  # Plain: the TLS step's `env` exported its ACL and TLS settings, which `start` would read.
  RMQ_ACL=0 RMQ_TLS=off RMQ_NAMESRVS=2 scripts/rocketmq.sh start 5.3.3
  eval "$(scripts/rocketmq.sh env)"
  cargo test --all-features -p rmqcat --test failover
fi
step "done"
