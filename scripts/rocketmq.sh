#!/usr/bin/env bash
# scripts/rocketmq.sh: a real Apache RocketMQ name server + ONE broker on 127.0.0.1 for tests,
# built from Maven Central jars (no Docker, no Apache download site).
#
#   scripts/rocketmq.sh fetch  [VERSION]   download namesrv+broker+tools jars into $RMQ_CACHE/<ver>/lib
#   scripts/rocketmq.sh start  [VERSION]   fetch if needed, start namesrv + broker, wait until ready
#   scripts/rocketmq.sh stop               TERM broker, then namesrv (KILL after 30 s); idempotent
#   scripts/rocketmq.sh status             running/stopped for each; exit 0 only if both are up
#   scripts/rocketmq.sh env                "export NAMESRV_ADDR=..." lines (eval "$(scripts/rocketmq.sh env)")
#   scripts/rocketmq.sh admin ARGS...      mqadmin (MQAdminStartup) against the running cluster, e.g.
#                                          scripts/rocketmq.sh admin updateTopic -b 127.0.0.1:10911 -t T -r 8 -w 8
#
# VERSION: 5.3.3 (default, or env RMQ_VERSION), 4.9.8 (runs the 4.9.7 server, see below), or any
# version whose rocketmq-namesrv and rocketmq-broker jars are on Maven Central.
#
# Environment:
#   RMQ_CACHE         jar cache                 (default <repo>/target/rocketmq)
#   RMQ_STATE         run state, one fresh dir per start, "current" -> the latest
#                                               (default <repo>/target/rocketmq-run)
#   RMQ_NAMESRV_PORT  name server port          (default 9876)
#   RMQ_BROKER_PORT   broker listenPort         (default 10911; the broker also binds PORT-2 and PORT+1)
#   RMQ_BOOT_TIMEOUT  seconds to wait for each "boot success" line (default 90)
#   RMQ_STOP_TIMEOUT  seconds to wait after TERM before KILL, per process (default 30)
#   JAVA              java binary               (default: java on PATH)
#   MVN               maven binary              (default: mvn on PATH)
#
# ---------------------------------------------------------------------------------------------------
# Facts checked by running this script (OpenJDK 17.0.15, Maven 3.8.7, 2 cores shared with other
# builds), and where /work/shared/docs/BROKER.md (unverified research notes) is wrong or incomplete:
#
#  1. 4.9.8 SERVER JARS ARE NOT ON MAVEN CENTRAL. org.apache.rocketmq:rocketmq-namesrv:4.9.8,
#     rocketmq-broker:4.9.8 and rocketmq-filter:4.9.8 return 404 (and are absent from
#     maven-metadata.xml), as do rocketmq-distribution/-example/-test/-openmessaging 4.9.8. Only the
#     client-side modules of 4.9.8 were published (client, common, remoting, store, srvutil, logging,
#     acl, tools, rocketmq-all pom). BROKER.md's pom with -Drocketmq.version=4.9.8 fails with "Could not
#     find artifact org.apache.rocketmq:rocketmq-namesrv:jar:4.9.8" (and leaves *.lastUpdated files
#     in ~/.m2). => "fetch/start 4.9.8" uses the complete 4.9.7 release (newest 4.9.x server on
#     Central), says so on stderr, and `env` prints RMQ_SERVER_VERSION=4.9.7. git diff
#     rocketmq-all-4.9.7..rocketmq-all-4.9.8 outside the client only touches config-update validation
#     (AdminBrokerProcessor, namesrv DefaultRequestProcessor), the ACL admin command and
#     MQVersion.CURRENT_VERSION (clusterList shows V4_9_7): nothing on the consumer paths.
#  2. Lib folders: 5.3.3 = 134 jars / 83 MB, 4.9.7 = 40 jars / 28 MB. `mvn -B -q` still prints ANSI
#     "ESC[0m" resets (stripped here).
#  3. Bound ports (ss -ltnp). 5.3.3 with bindAddress=127.0.0.1: 9876, 10911 and 10909 (fast/VIP port,
#     listenPort-2) on 127.0.0.1 only (shown as [::ffff:127.0.0.1]); the HA port 10912 (listenPort+1)
#     on the wildcard "*" (all IPv4+IPv6 addresses). 4.9.7 ignores bindAddress: 9876, 10909, 10911 and
#     10912 all bind "*". Clients still only talk to 127.0.0.1 because brokerIP1=127.0.0.1 (this
#     machine's NIC is 192.0.2.2 / fd00::2, which the broker would advertise otherwise).
#  4. Readiness lines (stdout), exactly: 5.3.3 "The Name Server boot success. serializeType=JSON,
#     address 127.0.0.1:9876"; 4.9.7 "The Name Server boot success. serializeType=JSON"; both brokers
#     "The broker[broker-a, 127.0.0.1:10911] boot success. serializeType=JSON and name server is
#     127.0.0.1:9876". The name server logs "new broker registered" in the same second, so the
#     broker is registered when its line appears (as BROKER.md says). The broker port accepted TCP
#     5-230 ms after the line. 5.3.3's broker.out also gets a ~44 KB logback status dump first (its
#     bundled rmq.broker.logback.xml uses a deprecated <level> element, which makes logback print its
#     whole status); harmless.
#  5. Startup (launch -> boot line), measured 5-6 times each while other builds ran on the 2 cores:
#     5.3.3 name server 1.5-3.0 s, broker 2.3-5.1 s, whole `start` 4.1-9.4 s;
#     4.9.7 name server 1.0-1.9 s, broker 1.5-3.0 s, whole `start` 2.9-5.3 s.
#  6. Graceful stop (TERM -> exit) is slow: 5.3.3 broker 7.9-18.8 s (its shutdown hook joins service
#     threads one after another: NettyEventExecutor ~2.5 s three times, PopBufferMergeService 2 s,
#     PopReviveService 3 s, ...; "Shutdown hook over, consuming total time(ms): 17057"), 5.3.3 name
#     server 3-7 s; 4.9.7 broker 5.5-9.1 s, name server ~3 s. All below the 30 s TERM->KILL limit.
#     A graceful stop leaves store/abort.bak (5.x) but no store/abort. Harmless log noise at stop:
#     "TransactionalMessageCheckService - Check error ... RejectedExecutionException" (4.9.7) and
#     "BatchUnregistrationService - Handle unregister broker request failed" (5.3.3 name server).
#  7. --add-opens on 4.9.x is really needed: without it the 4.9.7 broker's shutdown hook dies with
#     "InaccessibleObjectException: Unable to make public java.lang.Object
#     java.nio.DirectByteBuffer.attachment() accessible" (MappedFile.clean via StoreCheckpoint.shutdown)
#     and store/abort stays behind.
#  8. 4.9.x without $ROCKETMQ_HOME/conf/logback_namesrv.xml: prints "JoranException: Could not open
#     [.../conf/logback_namesrv.xml]" and exits 255 (-1), as BROKER.md says.
#  9. All broker.conf keys were applied (checked with `admin getBrokerConfig`). A fresh store has NO
#     commit-log file until the first message; then 00000000000000000000 and the pre-allocated
#     00000000000067108864 (64 MiB each, sparse) appear. 5.3.3 also creates a 38.7 MB (sparse)
#     store/timerwheel at boot. Store + logs of a test run stay below 1 MB of real disk.
# 10. Auto-created topics (autoCreateTopicEnable, Java producer default) get 4 queues, as BROKER.md says.
# 11. mqadmin calls take 3.5-6 s each here, not 1-2 s. With 5.3.3 tools a missing conf/tools.yml logs
#     "Failed to parse configuration to enable ACL." (4.9.7: "Cannot find conf file ... acl isn't be
#     enabled."), both harmless. `queryMsgById` writes the body to the hard-coded
#     /tmp/rocketmq/msgbodys/<id>. mqadmin needs a name-server address even for -b commands; `admin`
#     passes -Drocketmq.namesrv.addr so no HTTP name-server lookup is ever attempted.
# 12. BROKER.md 2.4 has a typo: RMQ_TMP=$(mktemp -d)) (one parenthesis too many).
# 13. Message facts seen on the wire/in the store (PROTOCOL.md 9-10), see scripts/java-producer.sh:
#     - batch messages: both brokers append the batch's own properties (its own UNIQ_KEY, WAIT, CLUSTER
#       ...) after each inner message's properties, so UNIQ_KEY and WAIT appear twice and a
#       last-wins decoder (Java's) reports the batch's UNIQ_KEY as msgId for EVERY message of the
#       batch - not the per-message ids in SendResult.getMsgId();
#     - 5.3.3 stores MSG_REGION=DefaultRegion and TRACE_ON=true in every message's properties
#       (AbstractSendMessageProcessor), keeps WAIT=true and ends the string with \u0002;
#       4.9.7 stores neither, strips WAIT from single messages, and writes no trailing \u0002;
#     - stored sysFlag: 0x301 ZLIB, 0x101 LZ4, 0x201 ZSTD (both brokers keep the producer's bits);
#     - UNIQ_KEY here is 56 hex chars: the client picks the IPv6 address fd00::2 for it.
# 14. Both servers (TLS "test mode", on by default) write self-signed keyutil_localhost_*.crt/.key
#     files into java.io.tmpdir; they are deleted on a clean exit but stay in /tmp after a SIGKILL.
#     This script points java.io.tmpdir into the run dir.
# 15. Not in BROKER.md: a `start` racing another `start` could kill the other's processes through a
#     shared "current" pointer; start/stop therefore take a lock ($RMQ_STATE/.lock).
# ---------------------------------------------------------------------------------------------------
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
POM="$SCRIPT_DIR/rocketmq/pom.xml"

DEFAULT_VERSION=${RMQ_VERSION:-5.3.3}
RMQ_CACHE=${RMQ_CACHE:-$REPO_ROOT/target/rocketmq}
RMQ_STATE=${RMQ_STATE:-$REPO_ROOT/target/rocketmq-run}
NS_PORT=${RMQ_NAMESRV_PORT:-9876}
BROKER_PORT=${RMQ_BROKER_PORT:-10911}
BOOT_TIMEOUT=${RMQ_BOOT_TIMEOUT:-90}
STOP_TIMEOUT=${RMQ_STOP_TIMEOUT:-30}
JAVA=${JAVA:-java}
MVN=${MVN:-mvn}
HOST=127.0.0.1
CURRENT="$RMQ_STATE/current"

JDK17_OPENS=(
  --add-opens java.base/java.nio=ALL-UNNAMED
  --add-opens java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
  --add-opens java.base/java.lang=ALL-UNNAMED
)

log() { printf '[rocketmq.sh] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
now_ms() { date +%s%3N; }

# The version whose server jars are actually used for a requested version.
server_version() {
  case "$1" in
    4.9.8) echo 4.9.7 ;;   # rocketmq-namesrv/broker 4.9.8 were never published to Maven Central
    *) echo "$1" ;;
  esac
}
is_v4() { [[ $1 == 4.* ]]; }

lib_dir() { echo "$RMQ_CACHE/$1/lib"; }
marker() { echo "$RMQ_CACHE/$1/lib.complete"; }

# ------------------------------------------------------------------------------------------- fetch
cmd_fetch() {
  local req=${1:-$DEFAULT_VERSION}
  local v; v=$(server_version "$req")
  [[ $v == "$req" ]] || log "NOTE: RocketMQ $req server jars are not on Maven Central; using $v instead"
  local dir mk; dir=$(lib_dir "$v"); mk=$(marker "$v")
  if [[ -f $mk && -d $dir ]]; then
    log "RocketMQ $v jars already in $dir"
    return 0
  fi
  command -v "$MVN" >/dev/null || die "maven ($MVN) not found"
  [[ -f $POM ]] || die "missing $POM"
  mkdir -p "$RMQ_CACHE"
  exec 8>"$RMQ_CACHE/.fetch.lock"
  flock -w 600 8 || die "timed out waiting for another fetch"
  if [[ -f $mk && -d $dir ]]; then
    flock -u 8; exec 8>&-
    log "RocketMQ $v jars already in $dir (fetched concurrently)"
    return 0
  fi
  local tmp="$dir.tmp.$$"
  rm -rf "$tmp" "$dir" "$mk"
  mkdir -p "$(dirname "$dir")"
  log "fetching RocketMQ $v jars from Maven Central into $dir"
  local t0; t0=$(now_ms)
  # (maven -q still prints ANSI resets; strip them)
  if ! "$MVN" -B -q -Dstyle.color=never -f "$POM" dependency:copy-dependencies \
      -DincludeScope=runtime -Drocketmq.version="$v" -DoutputDirectory="$tmp" 2>&1 8>&- 9>&- \
      | sed -e 's/\x1b\[[0-9;]*m//g' >&2; then
    rm -rf "$tmp"
    die "maven could not fetch RocketMQ $v"
  fi
  local a
  for a in rocketmq-namesrv rocketmq-broker rocketmq-tools rocketmq-store rocketmq-remoting rocketmq-common; do
    [[ -f "$tmp/$a-$v.jar" ]] || { rm -rf "$tmp"; die "$a-$v.jar missing after copy-dependencies"; }
  done
  mv "$tmp" "$dir"
  { echo "version=$v"; echo "fetched=$(date -u +%FT%TZ)"; echo "jars=$(find "$dir" -maxdepth 1 -name '*.jar' | wc -l)"; } >"$mk"
  flock -u 8; exec 8>&-
  log "fetched $(find "$dir" -maxdepth 1 -name '*.jar' | wc -l) jars ($(du -sh "$dir" | cut -f1)) in $(( ($(now_ms) - t0) / 1000 )) s"
}

# ------------------------------------------------------------------------------------ process utils
# A recorded pid counts as ours only if that process is alive AND its command line names the run
# directory it was started with (guards against pid reuse: we never signal anything else).
pid_of() { # role [rundir]
  local run=${2:-}
  if [[ -z $run ]]; then [[ -L $CURRENT || -d $CURRENT ]] || return 1; run=$(readlink -f "$CURRENT"); fi
  local f="$run/$1.pid" pid
  [[ -f $f ]] || return 1
  pid=$(<"$f")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/$pid/cmdline ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "-Duser.home=$run " || return 1
  echo "$pid"
}
alive() { kill -0 "$1" 2>/dev/null; }

port_open() { # port -> 0 if something accepts TCP on 127.0.0.1:port
  timeout 2 bash -c "exec 3<>/dev/tcp/$HOST/$1" 2>/dev/null
}

meta_get() { # key [default]
  local run f; run=$(readlink -f "$CURRENT" 2>/dev/null) || { echo "${2:-}"; return; }
  f="$run/meta"
  if [[ -f $f ]] && grep -q "^$1=" "$f"; then grep "^$1=" "$f" | tail -1 | cut -d= -f2-; else echo "${2:-}"; fi
}

# ---------------------------------------------------------------------------------------- configs
write_logback_v4() { # home
  local conf="$1/conf" n
  mkdir -p "$conf"
  for n in namesrv broker tools; do
    cat >"$conf/logback_$n.xml" <<EOF
<configuration>
  <appender name="F" class="ch.qos.logback.core.FileAppender">
    <file>\${user.home}/logs/rocketmqlogs/$n.log</file>
    <append>true</append>
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5p [%t] %c{0} - %m%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="F"/></root>
</configuration>
EOF
  done
}

write_confs() { # run
  local run=$1
  cat >"$run/namesrv.conf" <<EOF
listenPort=$NS_PORT
bindAddress=$HOST
EOF
  cat >"$run/broker.conf" <<EOF
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=0
brokerRole=ASYNC_MASTER
namesrvAddr=$HOST:$NS_PORT
brokerIP1=$HOST
brokerIP2=$HOST
listenPort=$BROKER_PORT
bindAddress=$HOST
storePathRootDir=$run/store
storePathCommitLog=$run/store/commitlog
# 64 MiB commit log files (default 1 GiB)
mappedFileSizeCommitLog=67108864
# 30000 entries x 20 B per consume-queue file (default 300000)
mappedFileSizeConsumeQueue=600000
# small index files (defaults 5000000 / 20000000 => ~420 MB per index file)
maxHashSlotNum=100000
maxIndexNum=400000
flushDiskType=ASYNC_FLUSH
autoCreateTopicEnable=true
defaultTopicQueueNums=8
autoCreateSubscriptionGroup=true
enablePropertyFilter=true
filterSupportRetry=true
longPollingEnable=true
messageDelayLevel=1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s
waitTimeMillsInSendQueue=1000
osPageCacheBusyTimeOutMills=3000
EOF
}

# -------------------------------------------------------------------------------------------- start
# launch role run version lib class args... ; writes $run/<role>.pid and $run/<role>.out
launch() {
  local role=$1 run=$2 v=$3 lib=$4; shift 4
  local -a jvm
  if [[ $role == namesrv ]]; then
    jvm=(-server -Xms128m -Xmx256m)
  else
    jvm=(-server -Xms512m -Xmx512m -XX:MaxDirectMemorySize=512m)
  fi
  jvm+=(-XX:+UseG1GC -XX:-OmitStackTraceInFastThrow "${JDK17_OPENS[@]}"
        "-Duser.home=$run" "-Drocketmq.home.dir=$run/home" "-Djava.io.tmpdir=$run/tmp")
  is_v4 "$v" || jvm+=("-Drmq.logback.configurationFile=rmq.$role.logback.xml")
  # setsid: own session, so the servers survive the caller's process group; the inner shell writes
  # its own pid and then exec's java under that same pid.
  # shellcheck disable=SC2016  # $$ and $0 are for the inner shell
  ROCKETMQ_HOME="$run/home" setsid bash -c 'echo $$ >"$0"; exec "$@"' "$run/$role.pid" \
    "$JAVA" "${jvm[@]}" -cp "$lib/*" "$@" </dev/null >"$run/$role.out" 2>&1 8>&- 9>&- &

  for _ in $(seq 50); do [[ -s $run/$role.pid ]] && break; sleep 0.1; done
  [[ -s $run/$role.pid ]] || die "$role: no pid file"
}

wait_boot() { # role run timeout -> prints seconds
  local role=$1 run=$2 t=$3 pid t0 deadline
  pid=$(<"$run/$role.pid")
  t0=$(now_ms); deadline=$(( t0 + t * 1000 ))
  while :; do
    if grep -q 'boot success' "$run/$role.out" 2>/dev/null; then
      echo $(( $(now_ms) - t0 )); return 0
    fi
    if ! alive "$pid"; then
      log "$role (pid $pid) died before boot success; tail of $run/$role.out:"
      tail -n 40 "$run/$role.out" >&2 || true
      [[ -f $run/logs/rocketmqlogs/$role.log ]] && { log "tail of $role.log:"; tail -n 40 "$run/logs/rocketmqlogs/$role.log" >&2; }
      return 1
    fi
    if (( $(now_ms) > deadline )); then
      log "$role (pid $pid): no boot success within ${t}s; tail of $run/$role.out:"
      tail -n 40 "$run/$role.out" >&2 || true
      return 1
    fi
    sleep 0.2
  done
}

wait_port() { # port pid timeout
  local port=$1 pid=$2 t=$3
  for _ in $(seq $(( t * 4 ))); do
    port_open "$port" && return 0
    alive "$pid" || return 1
    sleep 0.25
  done
  return 1
}

print_addrs() {
  echo "NAMESRV_ADDR=$HOST:$(meta_get NAMESRV_PORT "$NS_PORT")"
  echo "BROKER_ADDR=$HOST:$(meta_get BROKER_PORT "$BROKER_PORT")"
}

# Drop the stores of older (stopped) runs but keep their logs; keep at most 5 old run dirs.
prune_old_runs() {
  local d cur=""
  [[ -e $CURRENT ]] && cur=$(readlink -f "$CURRENT")
  for d in "$RMQ_STATE"/run-*; do
    [[ -d $d && $d != "$cur" ]] || continue
    if pid_of namesrv "$d" >/dev/null || pid_of broker "$d" >/dev/null; then continue; fi
    rm -rf "$d/store"
  done
  local -a runs
  mapfile -t runs < <(find "$RMQ_STATE" -maxdepth 1 -type d -name 'run-*' -printf '%T@ %p\n' | sort -rn | cut -d' ' -f2-)
  for d in "${runs[@]:5}"; do
    if ! pid_of namesrv "$d" >/dev/null && ! pid_of broker "$d" >/dev/null; then rm -rf "$d"; fi
  done
}

cmd_start() {
  local req=${1:-$DEFAULT_VERSION}
  local v; v=$(server_version "$req")
  local bpid npid
  if bpid=$(pid_of broker) && npid=$(pid_of namesrv); then
    log "already running: RocketMQ $(meta_get VERSION '?') namesrv pid $npid, broker pid $bpid ($(readlink -f "$CURRENT"))"
    [[ $(meta_get VERSION) == "$v" ]] || log "WARNING: the running broker is $(meta_get VERSION '?'), not $v; run stop first to switch"
    print_addrs
    return 0
  fi
  if pid_of broker >/dev/null || pid_of namesrv >/dev/null; then
    log "a half-running cluster from a previous start was found; stopping it first"
    cmd_stop
  fi
  command -v "$JAVA" >/dev/null || die "java ($JAVA) not found"
  cmd_fetch "$req"
  local lib; lib=$(lib_dir "$v")

  local p
  for p in "$NS_PORT" $(( BROKER_PORT - 2 )) "$BROKER_PORT" $(( BROKER_PORT + 1 )); do
    port_open "$p" && die "port $HOST:$p is already in use (by a process this script did not start?)"
  done

  mkdir -p "$RMQ_STATE"
  prune_old_runs
  local run; run=$(mktemp -d "$RMQ_STATE/run-$(date +%Y%m%d-%H%M%S)-XXXX")
  run=$(readlink -f "$run")
  ln -sfn "$run" "$CURRENT"
  mkdir -p "$run/home/conf" "$run/store" "$run/logs" "$run/tmp"
  is_v4 "$v" && write_logback_v4 "$run/home"
  write_confs "$run"
  { echo "VERSION=$v"; echo "REQUESTED_VERSION=$req"; echo "NAMESRV_PORT=$NS_PORT"; echo "BROKER_PORT=$BROKER_PORT"; } >"$run/meta"

  log "starting RocketMQ $v in $run"
  local t0 ns_ms br_ms port_ms; t0=$(now_ms)
  launch namesrv "$run" "$v" "$lib" org.apache.rocketmq.namesrv.NamesrvStartup -c "$run/namesrv.conf"
  if ! ns_ms=$(wait_boot namesrv "$run" "$BOOT_TIMEOUT"); then cmd_stop; die "name server did not start"; fi
  if ! wait_port "$NS_PORT" "$(<"$run/namesrv.pid")" 30; then cmd_stop; die "name server port $NS_PORT not accepting"; fi
  local t1; t1=$(now_ms)
  launch broker "$run" "$v" "$lib" org.apache.rocketmq.broker.BrokerStartup -c "$run/broker.conf" -n "$HOST:$NS_PORT"
  if ! br_ms=$(wait_boot broker "$run" "$BOOT_TIMEOUT"); then cmd_stop; die "broker did not start"; fi
  local t2; t2=$(now_ms)
  if ! wait_port "$BROKER_PORT" "$(<"$run/broker.pid")" 30; then cmd_stop; die "broker port $BROKER_PORT not accepting"; fi
  port_ms=$(( $(now_ms) - t2 ))
  { echo "NAMESRV_BOOT_MS=$ns_ms"; echo "BROKER_BOOT_MS=$br_ms"; echo "BROKER_PORT_EXTRA_MS=$port_ms";
    echo "TOTAL_START_MS=$(( $(now_ms) - t0 ))"; } >>"$run/meta"
  log "ready: namesrv boot ${ns_ms} ms, broker boot ${br_ms} ms (+${port_ms} ms until port accepts), total $(( $(now_ms) - t0 )) ms (broker launched after $(( t1 - t0 )) ms)"
  print_addrs
}

# --------------------------------------------------------------------------------------------- stop
stop_one() { # role
  local role=$1 pid t0
  pid=$(pid_of "$role") || { log "$role: not running"; return 0; }
  log "$role: TERM pid $pid"
  t0=$(now_ms)
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq $(( STOP_TIMEOUT * 5 ))); do alive "$pid" || break; sleep 0.2; done
  if alive "$pid"; then
    log "$role: still alive after $STOP_TIMEOUT s, KILL pid $pid"
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done
  fi
  log "$role: stopped after $(( $(now_ms) - t0 )) ms"
}

cmd_stop() {
  stop_one broker
  stop_one namesrv
  return 0
}

# ------------------------------------------------------------------------------------ status / env
cmd_status() {
  local ok=0 pid role
  for role in namesrv broker; do
    if pid=$(pid_of "$role"); then
      echo "$role: running (pid $pid, RocketMQ $(meta_get VERSION '?'), $(readlink -f "$CURRENT"))"
    else
      echo "$role: stopped"; ok=1
    fi
  done
  return $ok
}

cmd_env() {
  echo "export NAMESRV_ADDR=$HOST:$(meta_get NAMESRV_PORT "$NS_PORT")"
  echo "export BROKER_ADDR=$HOST:$(meta_get BROKER_PORT "$BROKER_PORT")"
  local v; v=$(meta_get VERSION)
  if [[ -n $v ]] && pid_of broker >/dev/null; then echo "export RMQ_SERVER_VERSION=$v"; fi
}

# ------------------------------------------------------------------------------------------- admin
cmd_admin() {
  local v run home
  if pid_of namesrv >/dev/null; then
    v=$(meta_get VERSION); run=$(readlink -f "$CURRENT")
  else
    log "WARNING: no running cluster started by this script; using RocketMQ $DEFAULT_VERSION jars"
    v=$(server_version "$DEFAULT_VERSION"); cmd_fetch "$v"
    run="$RMQ_STATE/admin-only"; mkdir -p "$run"
  fi
  home="$run/admin-home"; mkdir -p "$home"
  local -a jvm=(-Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "${JDK17_OPENS[@]}"
                "-Duser.home=$run/admin" "-Drocketmq.home.dir=$home"
                "-Drocketmq.namesrv.addr=$HOST:$(meta_get NAMESRV_PORT "$NS_PORT")")
  if is_v4 "$v"; then write_logback_v4 "$home"; else jvm+=(-Drmq.logback.configurationFile=rmq.tools.logback.xml); fi
  ROCKETMQ_HOME="$home" NAMESRV_ADDR="$HOST:$(meta_get NAMESRV_PORT "$NS_PORT")" \
    exec "$JAVA" "${jvm[@]}" -cp "$(lib_dir "$v")/*" org.apache.rocketmq.tools.command.MQAdminStartup "$@"
}

# start/stop hold an exclusive lock on $RMQ_STATE/.lock, so concurrent callers (e.g. several test
# binaries each running "start") serialise: the first starts the cluster, the others find it running.
# The lock fd is closed in the java children, so it is released when this script exits.
state_lock() {
  mkdir -p "$RMQ_STATE"
  exec 9>"$RMQ_STATE/.lock"
  flock -w 300 9 || die "timed out waiting for $RMQ_STATE/.lock"
}

usage() {
  sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

main() {
  local cmd=${1:-}
  [[ $# -gt 0 ]] && shift
  case "$cmd" in
    fetch) cmd_fetch "$@" ;;
    start) state_lock; cmd_start "$@" ;;
    stop) state_lock; cmd_stop ;;
    status) cmd_status ;;
    env) cmd_env ;;
    admin) cmd_admin "$@" ;;
    *) usage ;;
  esac
}
main "$@"
