#!/usr/bin/env bash
# scripts/secured.sh [smoke|full]: the suites on secured brokers. Restarts the real broker (name
# server 9876, broker 10911, as scripts/test.sh) in each secured setup and runs, in each:
#
#   ACL (RMQ_ACL=1) on 4.9.x (ACL 1.0) and 5.3.3 (ACL 2.0): rmqcat's ACL test, then the adapters'
#     real-broker e2e suite signed with the admin account (it creates topics);
#   TLS on 5.3.3 (RMQ_TLS enforcing, permissive, and enforcing with ACL on too): rmqcat's TLS test,
#     and where TLS is enforced the e2e suite over TLS, verified against the script's test CA.
#
# full (default, about 12 minutes): the whole e2e suite for the tokio and blocking adapters in
#   every setup (the blocking one leaves out POP: the tokio run signs the same requests), smol and
#   async-std whole over plain TLS and one scenario elsewhere.
# smoke (CI, from scripts/test.sh, about 6.5 minutes): rmqcat's ACL and TLS tests whole (they are
#   what checks signing and the handshake field by field); of the e2e suite, in each setup where
#   it runs, one scenario per adapter (consume 10,000, commit, restart) plus POP by tokio. The
#   scenarios do the same under ACL and TLS as on the plain broker, where the plain run covers
#   them all; what the secured setups change is the connection and the signature, which every
#   scenario exercises the same way.
#
# SKIP_ACL=1 or SKIP_TLS=1 leaves out those setups. Stops the broker at the end (and on failure).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mode=${1:-full}
case $mode in smoke | full) ;; *) echo "usage: $0 [smoke|full]" >&2; exit 2 ;; esac
trap 'scripts/rocketmq.sh stop >/dev/null 2>&1 || true' EXIT
step() { printf '\n---- secured.sh %s: %s (%ss)\n' "$mode" "$*" "$SECONDS"; }

# e2e ADAPTER [VAR=value ...]: the adapter's real-broker e2e suite with the given environment;
# in smoke mode one scenario, and POP as well for tokio.
e2e() {
  local adapter=$1 test=e2e_async_listener_against_the_real_broker
  shift
  [[ $adapter == blocking ]] && test=e2e_against_the_real_broker
  local only=() pop=()
  if [[ $mode == smoke ]]; then
    only=(E2E_ONLY="consume 10,000")
    [[ $adapter == tokio ]] && pop=(E2E_ONLY="pop")
  fi
  env "$@" "${only[@]}" cargo test --all-features -p "rocketmq-push-$adapter" --test e2e "$test"
  if ((${#pop[@]})); then
    env "$@" "${pop[@]}" cargo test --all-features -p "rocketmq-push-$adapter" --test e2e "$test"
  fi
}

signed=(ROCKETMQ_ACCESS_KEY=RocketMQ ROCKETMQ_SECRET_KEY=12345678)

acl_versions=(4.9.8 5.3.3) tls_setups=(enforcing permissive acl+enforcing)
[[ ${SKIP_ACL:-0} == 1 ]] && acl_versions=()
[[ ${SKIP_TLS:-0} == 1 ]] && tls_setups=()

for v in "${acl_versions[@]}"; do
  step "ACL on $v"
  scripts/rocketmq.sh stop
  RMQ_ACL=1 scripts/rocketmq.sh start "$v"
  eval "$(scripts/rocketmq.sh env)"
  cargo test --all-features -p rmqcat --test acl
  e2e tokio "${signed[@]}"
  e2e blocking "${signed[@]}" E2E_SKIP=pop
  # smol and async-std share the tokio adapter's run loop: one scenario.
  for a in smol async-std; do
    e2e "$a" "${signed[@]}" E2E_ONLY="consume 10,000"
  done
done

for setup in "${tls_setups[@]}"; do
  step "TLS $setup"
  acl=0 tls=$setup
  if [[ $setup == acl+* ]]; then acl=1 tls=${setup#acl+}; fi
  scripts/rocketmq.sh stop
  RMQ_ACL=$acl RMQ_TLS=$tls scripts/rocketmq.sh start 5.3.3
  eval "$(scripts/rocketmq.sh env)"
  cargo test --all-features -p rmqcat --test tls
  if [[ $tls == enforcing ]]; then
    creds=(ROCKETMQ_TLS_CA="$RMQ_TLS_CA")
    [[ $acl == 1 ]] && creds+=("${signed[@]}")
    e2e tokio "${creds[@]}"
    e2e blocking "${creds[@]}" E2E_SKIP=pop
    # smol and async-std share the tokio adapter's run loop and TLS: whole without ACL (full),
    # one scenario with it.
    only=()
    [[ $acl == 1 ]] && only=(E2E_ONLY="consume 10,000")
    for a in smol async-std; do
      e2e "$a" "${creds[@]}" E2E_SKIP=pop "${only[@]}"
    done
  fi
done
step "done"
