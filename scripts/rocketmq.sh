#!/usr/bin/env bash
# scripts/rocketmq.sh: a real Apache RocketMQ name server + ONE broker (or two, see RMQ_TOPOLOGY) on
# 127.0.0.1 for tests, built from Maven Central jars (no Docker, no Apache download site).
#
#   scripts/rocketmq.sh fetch  [VERSION]   download namesrv+broker+tools jars into $RMQ_CACHE/<ver>/lib
#   scripts/rocketmq.sh start  [VERSION]   fetch if needed, start namesrv + broker(s), wait until ready
#   scripts/rocketmq.sh stop               TERM all brokers, then namesrv (KILL after 30 s); idempotent
#   scripts/rocketmq.sh status             running/stopped for each role; exit 0 only if all are up
#   scripts/rocketmq.sh env                "export NAMESRV_ADDR=..." lines (eval "$(scripts/rocketmq.sh env)")
#   scripts/rocketmq.sh admin ARGS...      mqadmin (MQAdminStartup) against the running cluster, e.g.
#                                          scripts/rocketmq.sh admin updateTopic -b 127.0.0.1:10911 -t T -r 8 -w 8
#   scripts/rocketmq.sh kill ROLE          SIGKILL one process (a crash); returns when it is gone
#   scripts/rocketmq.sh term ROLE          TERM one process (graceful, KILL after 30 s); returns when gone
#   scripts/rocketmq.sh restart ROLE       start one process again with the same conf, store and ports
#                                          (TERMs it first if it runs); returns after boot success, the
#                                          port, and for a broker its next registration with the name
#                                          server (and, ms, the slave's HA connection to the master);
#                                          a restarted name server gets its brokers back only at their
#                                          next periodic registration (<= 30 s, fact 19), not awaited
#
# ROLE: namesrv, broker (broker-a's master, every topology), broker-b (2m), slave (ms).
# RMQ_TOPOLOGY (read by start, then recorded in the run's meta; later commands use the recorded one):
#   single  (default) one name server, one master broker-a                         (as always)
#   2m      two masters in DefaultCluster: broker-a on RMQ_BROKER_PORT, broker-b on RMQ_BROKER_B_PORT
#   ms      broker-a master (brokerId 0) + broker-a slave (brokerId 1, brokerRole=SLAVE) on
#           RMQ_SLAVE_PORT; classic master/slave HA (no DLedger, no controller), slaveReadEnable=true
# env prints BROKER_B_ADDR (2m) or SLAVE_ADDR (ms), and RMQ_TOPOLOGY, besides NAMESRV_ADDR/BROKER_ADDR.
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
#   RMQ_TOPOLOGY      single | 2m | ms          (default single; only read by start)
#   RMQ_ACL           1: ACL 1.0 request signing enforced (aclEnable=true, conf/plain_acl.yml with
#                     admin RocketMQ/12345678 and a plain user rmq_user/rmq_secret allowed PUB|SUB on
#                     every topic but rmq_denied (PUB only; 4.9.x only: 5.3.3's migration to ACL
#                     2.0 drops topicPerms, checked) and SUB on every group; no address white
#                     list, so every request from 127.0.0.1 must be signed). Only read by start; `env` prints RMQ_ACL,
#                     RMQ_ACCESS_KEY and RMQ_SECRET_KEY (the plain user) for such a run.
#   RMQ_NAMESRVS      1 (default) | 2: a second name server (role namesrv-b) on RMQ_NAMESRV_B_PORT
#                     (default RMQ_NAMESRV_PORT+1); every broker registers with both, `env` prints
#                     NAMESRV_ADDR as "a;b" (and NAMESRV_B_ADDR). Only read by start.
#   RMQ_TLS           off (default) | enforcing | permissive: TLS on the name server's and every
#                     broker's ports (Java's tls.server.mode), with a test CA and a server
#                     certificate for IP 127.0.0.1 / DNS localhost made by openssl in <run>/tls
#                     (tls.test.mode.enable=false: the servers present that certificate). Enforcing:
#                     plain connections are closed, the brokers reach the name server over TLS,
#                     and `admin` runs mqadmin with -Dtls.enable=true. Only read by start; `env`
#                     prints RMQ_TLS and RMQ_TLS_CA (the CA file) for such a run.
#   RMQ_BROKER_B_PORT broker-b listenPort (2m)  (default RMQ_BROKER_PORT+10)
#   RMQ_SLAVE_PORT    slave listenPort (ms)     (default RMQ_BROKER_PORT+10)
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
#     broker is registered when its line appears (as BROKER.md says) - NOT always on 5.3.3, see 17.
#     The broker port accepted TCP
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
#     shared "current" pointer; start/stop (and kill/term/restart) therefore take a lock
#     ($RMQ_STATE/.lock).
#
# Topologies and faults (RMQ_TOPOLOGY, kill/term/restart). Measured with RMQ_NAMESRV_PORT=19876
# RMQ_BROKER_PORT=20911 (P below), rmqcat route/produce/consume/group, 5.3.3 unless 4.9.7 is named:
# 16. Layout. 2m: broker-b (brokerName broker-b, brokerId 0) binds P+8, P+10, P+11; ms: the slave
#     (brokerName broker-a, brokerId 1, brokerRole=SLAVE) binds the same three, its HA port P+11 on
#     "*" too, although nothing connects to it. Ports are checked for overlap before start (2
#     brokers need listenPorts >= 4 apart, as BROKER.md says). broker-b and the slave run with
#     user.home=$run/<role> (their logs and store live there): two JVMs with the same user.home
#     write the same log files. Classic master/slave HA needs nothing beyond
#     brokerName/brokerId/brokerRole on the slave: haListenPort defaults to listenPort+1 (5.3.3
#     BrokerStartup honours haListenPort= from the conf, 4.9.7 always overwrites it with
#     listenPort+1, says its BrokerStartup source); the master registers brokerIP2:haListenPort as
#     its HA address (namesrv.log "new broker registered, ... HAService: 127.0.0.1:P+1") and the
#     name server returns it in the slave's registration result. brokerIP2=127.0.0.1 keeps
#     replication on loopback (the default is the NIC address 192.0.2.2; the "*" HA port would
#     accept that as well). slaveReadEnable=true on both. The route then has brokerAddrs {0: P, 1:
#     P+10} under broker-a, with the master's queue data. Replication checked: an established slave
#     -> P+1 connection, equal commitLogMaxOffset on both (`admin brokerStatus`: 311000 after 1000 x
#     100 B; 466500 later), and the slave served the messages once the master was down (21).
# 17. 5.3.3 may skip the boot-time registration. BrokerController.start() calls registerBrokerAll()
#     before the boot line, but BrokerOuterAPI only sends to the name servers that
#     NettyRemotingClient.getAvailableNameSrvList() holds, which an asynchronous scan
#     (scanAvailableNameSrv, started just before) fills in; if it has not connected yet the
#     registration is skipped without a log line, and the first one is the periodic one, 10 s after
#     start (then every registerNameServerPeriod=30 s). Seen for the master (broker/broker-b) in 7
#     of 31 starts/restarts, for the slave in 7 of 9. 4.9.7 uses the configured list: always
#     registered at boot. Every successful registration logs "Registering current broker to name
#     server completed" (4.9.7: "register broker[0]to name server ... OK") in the broker's
#     broker.log; start and restart wait for one (<= 45 s), so `start` (single, 5.3.3) takes
#     14.6-18.5 s instead of 4-9 s when the race is lost - before, the broker was simply not in the
#     route for those 10 s.
# 18. Do NOT set haMasterAddress on a 5.3.3 slave: BrokerController.initialize() passes it to the
#     message store before DefaultMessageStore.start() has created the DefaultHAClient
#     (haService.init runs in start()), so it is dropped, and since it is set the slave also stops
#     taking the master's HA address from registration results: store.log says "HAClient connect to
#     master null failed" every 5 s for good. Without it (this script): slave boot -> registration
#     (<= 10 s, 17) -> next 5 s HA retry -> store.log "HAClient connect to master 127.0.0.1:P+1",
#     "change state to TRANSFER". `start` (ms) waits for that established connection: it came
#     18.5-20.7 s after the slave's launch, whole start 24.7-38.3 s; 4.9.7: slave registered at
#     boot, HA after 6.7 s, whole start 10.1 s.
# 19. kill -9. The JVM is a zombie ~30 ms after SIGKILL, but pid 1 here (process_api) reaps it only
#     1.1-2.0 s later; the script counts a zombie as gone (kill returns after 7-152 ms). The name
#     server drops a killed broker at once ("the broker's channel destroyed, submit the unregister
#     request at once" in namesrv.log): the route lacked it 70-190 ms after `kill` began (rmqcat
#     route polled every 100 ms; 4 kills; 4.9.7: 136 ms), not after the 120 s expiry BROKER.md also
#     names (that one is for a broker that vanishes without closing its TCP connection). A `term`
#     unregisters during shutdown. Restart on the killed store: "last shutdown abnormally", recovery
#     63-70 ms; back in the route 2.8-5.8 s after `restart` began (boot line + boot registration) or
#     ~12.8 s when 17 strikes; 4.9.7 2.1-2.3 s. Every message sent (ASYNC_FLUSH) before a kill -9
#     was still there afterwards (max offsets unchanged; the page cache outlives the process). Name
#     server killed and restarted: it boots in 1.7-3.1 s with empty routes; each broker comes back
#     at its next periodic registration (every 30 s): 5.9 s here, up to 30 s.
# 20. Consumer offsets live in broker memory; store/config/consumerOffset.json is written every
#     flushConsumerOffsetInterval=5000 ms, the first time 10 s after start (mtimes: boot + 10.0 s,
#     then every 5.000 s; 4.9.7 has the same code and default). BROKER.md 5.11 omits the 10 s.
#     Offsets committed >= 5 s before a kill -9 survived the restart (5 of 5: ms, 2m, 4.9.7 ms); 100
#     offsets committed ~1 s before a kill -9 were lost (lag 200 -> 300 after restart), so those
#     messages come again. `term` persists them at shutdown: nothing lost.
# 21. ms with the master killed: the slave stays in the route (brokerAddrs {1: slave} under
#     broker-a, the master's 8/8 RW queue data kept) and consumers pull from it - but only what it
#     has synced. SlaveSynchronize.syncAll (topic configs, consumer offsets, delay offsets,
#     subscription groups) runs only once a minute on 5.3.3 ("now - lastSyncTimeMs > 60 s", checked
#     every 3 s; first run ~60 s after the slave starts; measured 59 s after boot, then 60 s later),
#     every 10 s on 4.9.7. Hence, 5.3.3: a topic created < 60 s before the master died gives
#     TOPIC_NOT_EXIST (17) "topic[T] not exist, apply first please!" on every pull from the slave
#     (the slave cannot sync without the master; `group` shows no committed offsets), while the
#     slave's consume queues do hold the messages. After a sync: consumption resumed from the
#     slave's offsets, which were up to a minute old: 200 messages consumed on the master after the
#     slave's last sync (7 s before the kill) were delivered again (4.9.7, 10 s sync, kill 12 s
#     after the commits: resumed exactly). Commits made while the master is down go to the slave
#     (`group` shows them) and are lost: the restarted master has its own flushed offsets and the
#     slave's next syncAll overwrote its own (500 -> 400 committed). Sends to the slave are refused:
#     5.3.3 SYSTEM_BUSY (2) "[REJECTREQUEST]system busy, start flow control for a while", 4.9.7
#     SERVICE_NOT_AVAILABLE (14) "... messages are put to the slave ..." (a Java producer only sends
#     to brokerId 0). Master restarted: the slave's HA client, which kept the old address,
#     reconnects at its next 5 s retry: HA 5.8-12.9 s after `restart` began (4.9.7: 6.5 s). A
#     restarted slave caught up with what was sent while it was down (equal commitLogMaxOffset);
#     back in the route after 4.7-6.7 s (boot registration) or 12.6-12.8 s (17), HA after
#     10.7-17.7 s.
# 22. 2m: `--create 8` makes 16 queues on 2 brokers. A killed broker-b disappears from every topic's
#     route (8 queues on broker-a left) and sends go on to broker-a; its flushed offsets survived
#     the restart. Booting both masters side by side on the 2 cores: broker 4.2-9.9 s, broker-b
#     5.4-10.3 s, `start` 12.4-17.1 s (17.1 s: broker-b missed its boot registration, 17; 4.9.7:
#     5.9 s). `stop` TERMs all brokers at once, then the name server: ms 16.1-18.1 s, 2m 17.3 s
#     (brokers 9.8-15.9 s each, in parallel).
# 23. A full disk looks like a broken broker. Both brokers measure the store's file system as
#     used / (used + available to non-root), as `df` does, every 10 s. Above 90 % every send is refused:
#     SERVICE_NOT_AVAILABLE (14) "the broker's disk is full [CL:  0.91 CQ:  0.91 INDEX: -1.00]"
#     (a CI run failed so, its disk filled by build outputs). Above 85 % they delete commit-log
#     files early. The limit is -Drocketmq.broker.diskSpaceWarningLevelRatio on 4.9.7 and
#     diskSpaceWarningLevelRatio in broker.conf on 5.3.3, but 5.3.3 clamps it to 0.35..0.90, so it
#     cannot be raised there. `start` refuses to start at 90 % and warns at 85 %.
# ---------------------------------------------------------------------------------------------------
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
POM="$SCRIPT_DIR/rocketmq/pom.xml"

log() { printf '[rocketmq.sh] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
now_ms() { date +%s%3N; }
# Percent of DIR's file system in use, rounded up, as the brokers compute it (fact 23).
disk_used_pct() {
  df -P -k "$1" | awk 'NR == 2 { t = $3 + $4; if (t > 0) print int(($3 * 100 + t - 1) / t); else print 0 }'
}

DEFAULT_VERSION=${RMQ_VERSION:-5.3.3}
RMQ_CACHE=${RMQ_CACHE:-$REPO_ROOT/target/rocketmq}
RMQ_STATE=${RMQ_STATE:-$REPO_ROOT/target/rocketmq-run}
NS_PORT=${RMQ_NAMESRV_PORT:-9876}
BROKER_PORT=${RMQ_BROKER_PORT:-10911}
BOOT_TIMEOUT=${RMQ_BOOT_TIMEOUT:-90}
STOP_TIMEOUT=${RMQ_STOP_TIMEOUT:-30}
for _v in NS_PORT BROKER_PORT BOOT_TIMEOUT STOP_TIMEOUT; do
  [[ ${!_v} =~ ^[0-9]+$ ]] || die "$_v must be a number, not '${!_v}'"
done
BROKER_B_PORT=${RMQ_BROKER_B_PORT:-$(( BROKER_PORT + 10 ))}
SLAVE_PORT=${RMQ_SLAVE_PORT:-$(( BROKER_PORT + 10 ))}
[[ $BROKER_B_PORT =~ ^[0-9]+$ ]] || die "RMQ_BROKER_B_PORT must be a number, not '$BROKER_B_PORT'"
[[ $SLAVE_PORT =~ ^[0-9]+$ ]] || die "RMQ_SLAVE_PORT must be a number, not '$SLAVE_PORT'"
TOPOLOGY=${RMQ_TOPOLOGY:-single}
ACL=${RMQ_ACL:-0}
TLS=${RMQ_TLS:-off}
NAMESRVS=${RMQ_NAMESRVS:-1}
[[ $NAMESRVS == 1 || $NAMESRVS == 2 ]] || die "RMQ_NAMESRVS must be 1 or 2, not '$NAMESRVS'"
NS_B_PORT=${RMQ_NAMESRV_B_PORT:-$(( NS_PORT + 1 ))}
[[ $NS_B_PORT =~ ^[0-9]+$ ]] || die "RMQ_NAMESRV_B_PORT must be a number, not '$NS_B_PORT'"
case "$TLS" in off|enforcing|permissive) ;; *) die "RMQ_TLS must be off, enforcing or permissive, not '$TLS'" ;; esac
JAVA=${JAVA:-java}
MVN=${MVN:-mvn}
HOST=127.0.0.1
NS_ADDRS="$HOST:$NS_PORT"
[[ $NAMESRVS == 2 ]] && NS_ADDRS+=";$HOST:$NS_B_PORT"
CURRENT="$RMQ_STATE/current"
ALL_BROKER_ROLES=(slave broker-b broker)   # stop order: replicas first, broker-a's master last

JDK17_OPENS=(
  --add-opens java.base/java.nio=ALL-UNNAMED
  --add-opens java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
  --add-opens java.base/java.lang=ALL-UNNAMED
)

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

# -------------------------------------------------------------------------------- topology / roles
# Roles: namesrv, broker (broker-a's master, in every topology), broker-b (2m: a second master),
# slave (ms: broker-a's slave, brokerId 1). namesrv and broker use the run dir itself as user.home
# (logs in $run/logs, broker store in $run/store, as always); broker-b and slave get their own
# user.home $run/<role> (logs in $run/<role>/logs, store in $run/<role>/store), so no two JVMs ever
# write the same log file.
valid_topology() { case "$1" in single|2m|ms) return 0 ;; *) return 1 ;; esac; }
topology_brokers() { # topology -> broker roles in start order
  case "$1" in
    2m) echo "broker broker-b" ;;
    ms) echo "broker slave" ;;
    *) echo "broker" ;;
  esac
}
# The name servers of the current run (or of the coming start when there is none).
namesrv_roles() {
  local n=$NAMESRVS run
  if run=$(current_run 2>/dev/null) && [[ -f $run/meta ]]; then n=$(meta_get_run "$run" NAMESRVS 1); fi
  if [[ $n == 2 ]]; then echo "namesrv namesrv-b"; else echo namesrv; fi
}
topology_roles() { echo "$(namesrv_roles) $(topology_brokers "$1")"; }
is_namesrv_role() { [[ $1 == namesrv || $1 == namesrv-b ]]; }
# Every name server of a run, as brokers and clients are given them ("a;b").
namesrv_addrs() { # run
  local a="$HOST:$(role_port "$1" namesrv)"
  [[ $(meta_get_run "$1" NAMESRVS 1) == 2 ]] && a+=";$HOST:$(role_port "$1" namesrv-b)"
  echo "$a"
}
is_broker_role() { [[ $1 == broker || $1 == broker-b || $1 == slave ]]; }

current_run() { [[ -L $CURRENT || -d $CURRENT ]] || return 1; readlink -f "$CURRENT"; }

meta_get_run() { # run key [default]
  local f="$1/meta"
  if [[ -f $f ]] && grep -q "^$2=" "$f"; then grep "^$2=" "$f" | tail -1 | cut -d= -f2-; else echo "${3:-}"; fi
}
meta_get() { # key [default]  (from the current run)
  local run; run=$(current_run 2>/dev/null) || { echo "${2:-}"; return; }
  meta_get_run "$run" "$1" "${2:-}"
}
# The topology of the current run (runs started before topologies existed are "single"), or
# $RMQ_TOPOLOGY when there is no run yet.
run_topology() {
  local run; run=$(current_run 2>/dev/null) || { echo "$TOPOLOGY"; return; }
  [[ -f $run/meta ]] || { echo "$TOPOLOGY"; return; }
  meta_get_run "$run" TOPOLOGY single
}

role_home() { # run role
  case "$2" in namesrv|broker) echo "$1" ;; *) echo "$1/$2" ;; esac
}
role_conf() { echo "$1/$2.conf"; }
role_port() { # run role -> its listen port (from the run's meta, else from the environment)
  case "$2" in
    namesrv) meta_get_run "$1" NAMESRV_PORT "$NS_PORT" ;;
    namesrv-b) meta_get_run "$1" NAMESRV_B_PORT "$NS_B_PORT" ;;
    broker) meta_get_run "$1" BROKER_PORT "$BROKER_PORT" ;;
    broker-b) meta_get_run "$1" BROKER_B_PORT "$BROKER_B_PORT" ;;
    slave) meta_get_run "$1" SLAVE_PORT "$SLAVE_PORT" ;;
  esac
}
role_log() { # run role -> its main log file
  local home; home=$(role_home "$1" "$2")
  if is_namesrv_role "$2"; then echo "$home/logs/rocketmqlogs/namesrv.log"; else echo "$home/logs/rocketmqlogs/broker.log"; fi
}
# A broker binds listenPort, listenPort-2 (fast/VIP) and listenPort+1 (HA); a name server one port.
role_ports() { # role port
  if is_namesrv_role "$1"; then echo "$2"; else echo "$(( $2 - 2 )) $2 $(( $2 + 1 ))"; fi
}

# ------------------------------------------------------------------------------------ process utils
# A recorded pid counts as ours only if that process is alive AND its command line names the
# user.home it was started with (the run directory, or $run/<role> for broker-b and slave) - a
# guard against pid reuse: we never signal anything else.
pid_of() { # role [rundir]
  local run=${2:-}
  if [[ -z $run ]]; then run=$(current_run) || return 1; fi
  local f="$run/$1.pid" pid
  [[ -f $f ]] || return 1
  pid=$(<"$f")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/$pid/cmdline ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "-Duser.home=$(role_home "$run" "$1") " || return 1
  echo "$pid"
}
# Running = exists and is not a zombie: a killed JVM is a zombie after ~30 ms, but pid 1 here reaps
# it only ~2 s later (fact 19); a zombie holds no ports, files or memory any more.
alive() {
  local st
  st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  st=${st##*) }
  [[ -n $st && ${st%% *} != Z ]]
}
run_has_live_process() { # run
  local r
  for r in namesrv namesrv-b "${ALL_BROKER_ROLES[@]}"; do pid_of "$r" "$1" >/dev/null && return 0; done
  return 1
}

port_open() { # port -> 0 if something accepts TCP on 127.0.0.1:port
  timeout 2 bash -c "exec 3<>/dev/tcp/$HOST/$1" 2>/dev/null
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

write_broker_conf() { # file brokerName brokerId brokerRole listenPort storeRoot
  cat >"$1" <<EOF
brokerClusterName=DefaultCluster
brokerName=$2
brokerId=$3
brokerRole=$4
namesrvAddr=$NS_ADDRS
brokerIP1=$HOST
brokerIP2=$HOST
listenPort=$5
bindAddress=$HOST
storePathRootDir=$6
storePathCommitLog=$6/commitlog
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

write_confs() { # run topology
  local run=$1 topo=$2
  cat >"$run/namesrv.conf" <<EOF
listenPort=$NS_PORT
bindAddress=$HOST
EOF
  if [[ $NAMESRVS == 2 ]]; then
    mkdir -p "$run/namesrv-b"
    cat >"$run/namesrv-b.conf" <<EOF
listenPort=$NS_B_PORT
bindAddress=$HOST
EOF
  fi
  write_broker_conf "$run/broker.conf" broker-a 0 ASYNC_MASTER "$BROKER_PORT" "$run/store"
  case "$topo" in
    2m)
      write_broker_conf "$(role_conf "$run" broker-b)" broker-b 0 ASYNC_MASTER "$BROKER_B_PORT" "$run/broker-b/store"
      ;;
    ms)
      write_broker_conf "$(role_conf "$run" slave)" broker-a 1 SLAVE "$SLAVE_PORT" "$run/slave/store"
      local f
      for f in "$run/broker.conf" "$(role_conf "$run" slave)"; do
        cat >>"$f" <<EOF
# topology ms: classic master/slave HA (no DLedger, no controller); consumers may pull from the slave
slaveReadEnable=true
EOF
      done
      cat >>"$(role_conf "$run" slave)" <<EOF
# The slave learns the master's HA address (the master's brokerIP2 : haListenPort = listenPort+1)
# from its registration result. Do NOT set haMasterAddress here: 5.3.3 drops it (fact 18).
EOF
      ;;
  esac
}

write_acl() { # run topology version: every broker enforces ACL 1.0 with the accounts below
  local run=$1 topo=$2 role dir
  local v=$3
  for role in $(topology_brokers "$topo"); do
    if is_v4 "$v"; then
      echo "aclEnable=true" >>"$(role_conf "$run" "$role")"
    else
      # 5.x ignores aclEnable: ACL 2.0 authentication, its users migrated from plain_acl.yml.
      cat >>"$(role_conf "$run" "$role")" <<EOF
authenticationEnabled=true
authenticationProvider=org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider
authenticationMetadataProvider=org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider
initAuthenticationUser={"username":"RocketMQ","password":"12345678"}
innerClientAuthenticationCredentials={"accessKey":"RocketMQ","secretKey":"12345678"}
migrateAuthFromV1Enabled=true
EOF
    fi
  done
  # Every broker's ROCKETMQ_HOME (rocketmq.home.dir) is $run/home: one file serves them all.
  dir="$run/home/conf"
  mkdir -p "$dir"
  cat >"$dir/plain_acl.yml" <<EOF
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    admin: true
  - accessKey: rmq_user
    secretKey: rmq_secret
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    topicPerms:
      - rmq_denied=PUB
EOF
}

write_tls() { # run: a test CA and a server certificate (PKCS#8 key: 4.9's netty reads no other)
  local dir="$1/tls"
  command -v openssl >/dev/null || die "RMQ_TLS needs openssl"
  mkdir -p "$dir"
  (
    cd "$dir"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 30 \
      -subj "/CN=rocketmq-push test CA" -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=localhost" 2>/dev/null
    printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "basicConstraints=CA:FALSE" \
      "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 30 \
      -extfile server.ext 2>/dev/null
  ) || die "openssl could not make the test certificates"
  grep -q "BEGIN PRIVATE KEY" "$dir/server.key" || die "$dir/server.key is not PKCS#8"
  : >"$dir/none.properties"
}

tls_jvm_flags() { # run -> the -D flags of the run's TLS mode (none when off)
  local run=$1 mode; mode=$(meta_get_run "$run" TLS off)
  [[ $mode == off ]] && return 0
  # tls.config.file points at an empty file: the default /etc/rocketmq/tls.properties would
  # override these flags if it existed.
  printf '%s\n' "-Dtls.server.mode=$mode" -Dtls.test.mode.enable=false \
    "-Dtls.server.certPath=$run/tls/server.pem" "-Dtls.server.keyPath=$run/tls/server.key" \
    "-Dtls.config.file=$run/tls/none.properties"
}

# -------------------------------------------------------------------------------------------- start
# launch role run version lib class args... ; writes $run/<role>.pid and $run/<role>.out
launch() {
  local role=$1 run=$2 v=$3 lib=$4; shift 4
  local -a jvm
  local kind=broker home; home=$(role_home "$run" "$role")
  is_namesrv_role "$role" && kind=namesrv
  if [[ $kind == namesrv ]]; then
    jvm=(-server -Xms128m -Xmx256m)
  else
    jvm=(-server -Xms512m -Xmx512m -XX:MaxDirectMemorySize=512m)
  fi
  jvm+=(-XX:+UseG1GC -XX:-OmitStackTraceInFastThrow "${JDK17_OPENS[@]}"
        "-Duser.home=$home" "-Drocketmq.home.dir=$run/home" "-Djava.io.tmpdir=$run/tmp")
  is_v4 "$v" || jvm+=("-Drmq.logback.configurationFile=rmq.$kind.logback.xml")
  local flag
  while IFS= read -r flag; do [[ -n $flag ]] && jvm+=("$flag"); done < <(tls_jvm_flags "$run")
  mkdir -p "$home/logs"
  rm -f "$run/$role.pid"
  # setsid: own session, so the servers survive the caller's process group; the inner shell writes
  # its own pid and then exec's java under that same pid.
  # shellcheck disable=SC2016  # $$ and $0 are for the inner shell
  ROCKETMQ_HOME="$run/home" setsid bash -c 'echo $$ >"$0"; exec "$@"' "$run/$role.pid" \
    "$JAVA" "${jvm[@]}" -cp "$lib/*" "$@" </dev/null >"$run/$role.out" 2>&1 8>&- 9>&- &

  for _ in $(seq 50); do [[ -s $run/$role.pid ]] && break; sleep 0.1; done
  [[ -s $run/$role.pid ]] || die "$role: no pid file"
}

launch_role() { # role run version lib
  local role=$1 run=$2 v=$3 lib=$4
  if is_namesrv_role "$role"; then
    launch "$role" "$run" "$v" "$lib" org.apache.rocketmq.namesrv.NamesrvStartup -c "$(role_conf "$run" "$role")"
  else
    launch "$role" "$run" "$v" "$lib" org.apache.rocketmq.broker.BrokerStartup -c "$(role_conf "$run" "$role")" \
      -n "$(namesrv_addrs "$run")"
  fi
}

wait_boot() { # role run timeout -> prints milliseconds
  local role=$1 run=$2 t=$3 pid t0 deadline lf
  pid=$(<"$run/$role.pid")
  t0=$(now_ms); deadline=$(( t0 + t * 1000 ))
  while :; do
    if grep -q 'boot success' "$run/$role.out" 2>/dev/null; then
      echo $(( $(now_ms) - t0 )); return 0
    fi
    if ! alive "$pid"; then
      log "$role (pid $pid) died before boot success; tail of $run/$role.out:"
      tail -n 40 "$run/$role.out" >&2 || true
      lf=$(role_log "$run" "$role")
      [[ -f $lf ]] && { log "tail of $lf:"; tail -n 40 "$lf" >&2; }
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

# Successful registrations with the name server, from the broker's own log (5.x: "Registering current
# broker to name server completed", 4.9.x: "register broker[0]to name server ... OK").
reg_count() { # run role
  local f; f=$(role_log "$1" "$2")
  [[ -f $f ]] || { echo 0; return; }
  grep -cE 'Registering current broker to name server completed|register broker\[[0-9]+\] ?to name server .* OK' "$f" || true
}
wait_registered() { # run role count_before timeout -> prints ms; waits for one more registration
  local run=$1 role=$2 before=$3 t=$4 t0 pid
  t0=$(now_ms); pid=$(<"$run/$role.pid")
  while (( $(reg_count "$run" "$role") <= before )); do
    alive "$pid" || return 1
    (( $(now_ms) - t0 < t * 1000 )) || return 1
    sleep 0.2
  done
  echo $(( $(now_ms) - t0 ))
}
# ms: the slave's HA client has an established TCP connection to the master's HA port.
ha_connected() { # master_listen_port
  [[ -n $(ss -Htn state established "( dport = :$(( $1 + 1 )) )" 2>/dev/null) ]]
}
wait_ha() { # master_listen_port timeout -> prints ms
  local t0; t0=$(now_ms)
  command -v ss >/dev/null || { log "WARNING: no ss (iproute2): not waiting for the slave's HA connection"; echo 0; return 0; }
  until ha_connected "$1"; do
    (( $(now_ms) - t0 < $2 * 1000 )) || return 1
    sleep 0.2
  done
  echo $(( $(now_ms) - t0 ))
}

print_addrs() {
  local run; run=$(current_run 2>/dev/null) || run=""
  if [[ -n $run ]]; then echo "NAMESRV_ADDR=$(namesrv_addrs "$run")"; else echo "NAMESRV_ADDR=$HOST:$NS_PORT"; fi
  echo "BROKER_ADDR=$HOST:$(meta_get BROKER_PORT "$BROKER_PORT")"
  case "$(run_topology)" in
    2m) echo "BROKER_B_ADDR=$HOST:$(meta_get BROKER_B_PORT "$BROKER_B_PORT")" ;;
    ms) echo "SLAVE_ADDR=$HOST:$(meta_get SLAVE_PORT "$SLAVE_PORT")" ;;
  esac
}

# Drop the stores of older (stopped) runs but keep their logs; keep at most 5 old run dirs.
prune_old_runs() {
  local d cur=""
  [[ -e $CURRENT ]] && cur=$(readlink -f "$CURRENT")
  for d in "$RMQ_STATE"/run-*; do
    [[ -d $d && $d != "$cur" ]] || continue
    run_has_live_process "$d" && continue
    rm -rf "$d/store" "$d/broker-b/store" "$d/slave/store"
  done
  local -a runs
  mapfile -t runs < <(find "$RMQ_STATE" -maxdepth 1 -type d -name 'run-*' -printf '%T@ %p\n' | sort -rn | cut -d' ' -f2-)
  for d in "${runs[@]:5}"; do
    run_has_live_process "$d" || rm -rf "$d"
  done
}

# Every port the topology binds, each once; dies if two roles would share one.
check_ports() { # topology
  local topo=$1 role p port
  local -A owner=()
  local ns=namesrv
  [[ $NAMESRVS == 2 ]] && ns="namesrv namesrv-b"
  for role in $ns $(topology_brokers "$topo"); do
    case "$role" in
      namesrv) port=$NS_PORT ;; namesrv-b) port=$NS_B_PORT ;; broker) port=$BROKER_PORT ;; broker-b) port=$BROKER_B_PORT ;; slave) port=$SLAVE_PORT ;;
    esac
    for p in $(role_ports "$role" "$port"); do
      (( p > 0 && p < 65536 )) || die "$role: port $p out of range"
      [[ -z ${owner[$p]:-} ]] || die "port $p is needed by both ${owner[$p]} and $role (a broker binds listenPort-2, listenPort and listenPort+1); choose other ports"
      owner[$p]=$role
    done
  done
  for p in "${!owner[@]}"; do
    port_open "$p" && die "port $HOST:$p is already in use (by a process this script did not start?)"
  done
  return 0
}

cmd_start() {
  local req=${1:-$DEFAULT_VERSION}
  local v; v=$(server_version "$req")
  local topo=$TOPOLOGY
  valid_topology "$topo" || die "RMQ_TOPOLOGY must be single, 2m or ms, not '$topo'"
  local run role pid all=1 any=0 desc=""
  if run=$(current_run 2>/dev/null); then
    for role in $(topology_roles "$(run_topology)"); do
      if pid=$(pid_of "$role"); then any=1; desc+="${desc:+, }$role pid $pid"; else all=0; fi
    done
    run_has_live_process "$run" && any=1
    if (( all )); then
      log "already running: RocketMQ $(meta_get VERSION '?') $desc ($run)"
      [[ $(meta_get VERSION) == "$v" ]] || log "WARNING: the running broker is $(meta_get VERSION '?'), not $v; run stop first to switch"
      [[ $(run_topology) == "$topo" ]] || log "WARNING: the running topology is $(run_topology), not $topo; run stop first to switch"
      print_addrs
      return 0
    fi
    if (( any )); then
      log "a half-running cluster from a previous start was found; stopping it first"
      cmd_stop
    fi
  fi
  command -v "$JAVA" >/dev/null || die "java ($JAVA) not found"
  cmd_fetch "$req"
  local lib; lib=$(lib_dir "$v")

  check_ports "$topo"

  mkdir -p "$RMQ_STATE"
  prune_old_runs
  local used; used=$(disk_used_pct "$RMQ_STATE") || die "df failed on $RMQ_STATE"
  [[ $used =~ ^[0-9]+$ ]] || die "could not read the disk use of $RMQ_STATE"
  ((used < 90)) || die "the file system of $RMQ_STATE is $used% used: the broker refuses every send above 90% (fact 23); free some disk first"
  if ((used >= 85)); then
    log "WARNING: the file system of $RMQ_STATE is $used% used; above 90% the broker refuses every send (fact 23)"
  fi
  run=$(mktemp -d "$RMQ_STATE/run-$(date +%Y%m%d-%H%M%S)-XXXX")
  run=$(readlink -f "$run")
  ln -sfn "$run" "$CURRENT"
  mkdir -p "$run/home/conf" "$run/store" "$run/logs" "$run/tmp"
  for role in $(topology_brokers "$topo"); do mkdir -p "$(role_home "$run" "$role")/store"; done
  is_v4 "$v" && write_logback_v4 "$run/home"
  write_confs "$run" "$topo"
  if [[ $ACL == 1 ]]; then
    write_acl "$run" "$topo" "$v"
  fi
  [[ $TLS != off ]] && write_tls "$run"
  { echo "VERSION=$v"; echo "ACL=$ACL"; echo "TLS=$TLS"; echo "REQUESTED_VERSION=$req"; echo "NAMESRV_PORT=$NS_PORT"; echo "BROKER_PORT=$BROKER_PORT";
    echo "NAMESRVS=$NAMESRVS"; [[ $NAMESRVS == 2 ]] && echo "NAMESRV_B_PORT=$NS_B_PORT";
    echo "TOPOLOGY=$topo"
    case "$topo" in 2m) echo "BROKER_B_PORT=$BROKER_B_PORT" ;; ms) echo "SLAVE_PORT=$SLAVE_PORT" ;; esac
  } >"$run/meta"

  log "starting RocketMQ $v ($topo) in $run"
  local t0 ns_ms br_ms b2_ms b2_reg_ms sl_ms sl_reg_ms sl_ha_ms port_ms reg_ms; t0=$(now_ms)
  launch_role namesrv "$run" "$v" "$lib"
  if ! ns_ms=$(wait_boot namesrv "$run" "$BOOT_TIMEOUT"); then cmd_stop; die "name server did not start"; fi
  if ! wait_port "$NS_PORT" "$(<"$run/namesrv.pid")" 30; then cmd_stop; die "name server port $NS_PORT not accepting"; fi
  if [[ $NAMESRVS == 2 ]]; then
    launch_role namesrv-b "$run" "$v" "$lib"
    if ! wait_boot namesrv-b "$run" "$BOOT_TIMEOUT" >/dev/null; then cmd_stop; die "name server b did not start"; fi
    if ! wait_port "$NS_B_PORT" "$(<"$run/namesrv-b.pid")" 30; then cmd_stop; die "name server b port $NS_B_PORT not accepting"; fi
  fi
  local t1; t1=$(now_ms)
  launch_role broker "$run" "$v" "$lib"
  # 2m: both masters boot side by side. ms: the slave only starts once the master is registered, so
  # that the name server can hand the master's HA address to the slave's first registration.
  [[ $topo == 2m ]] && launch_role broker-b "$run" "$v" "$lib"
  if ! br_ms=$(wait_boot broker "$run" "$BOOT_TIMEOUT"); then cmd_stop; die "broker did not start"; fi
  local t2; t2=$(now_ms)
  if ! wait_port "$BROKER_PORT" "$(<"$run/broker.pid")" 30; then cmd_stop; die "broker port $BROKER_PORT not accepting"; fi
  port_ms=$(( $(now_ms) - t2 ))
  # 5.x registers at boot only if its name-server connection scan has finished (fact 17)
  if ! reg_ms=$(wait_registered "$run" broker 0 45); then cmd_stop; die "broker did not register with the name server"; fi
  if [[ $topo == 2m ]]; then
    if ! wait_boot broker-b "$run" "$BOOT_TIMEOUT" >/dev/null; then cmd_stop; die "broker-b did not start"; fi
    b2_ms=$(( $(now_ms) - t1 ))
    if ! wait_port "$BROKER_B_PORT" "$(<"$run/broker-b.pid")" 30; then cmd_stop; die "broker-b port $BROKER_B_PORT not accepting"; fi
    if ! b2_reg_ms=$(wait_registered "$run" broker-b 0 45); then cmd_stop; die "broker-b did not register with the name server"; fi
  elif [[ $topo == ms ]]; then
    local t3; t3=$(now_ms)
    launch_role slave "$run" "$v" "$lib"
    if ! sl_ms=$(wait_boot slave "$run" "$BOOT_TIMEOUT"); then cmd_stop; die "slave did not start"; fi
    if ! wait_port "$SLAVE_PORT" "$(<"$run/slave.pid")" 30; then cmd_stop; die "slave port $SLAVE_PORT not accepting"; fi
    if ! sl_reg_ms=$(wait_registered "$run" slave 0 45); then cmd_stop; die "slave did not register with the name server"; fi
    if ! sl_ha_ms=$(wait_ha "$BROKER_PORT" 45); then cmd_stop; die "slave: no HA connection to the master's port $(( BROKER_PORT + 1 ))"; fi
    sl_ha_ms=$(( $(now_ms) - t3 ))
  fi
  { echo "NAMESRV_BOOT_MS=$ns_ms"; echo "BROKER_BOOT_MS=$br_ms"; echo "BROKER_PORT_EXTRA_MS=$port_ms";
    echo "BROKER_REGISTER_EXTRA_MS=$reg_ms"
    [[ -n ${b2_ms:-} ]] && { echo "BROKER_B_READY_MS=$b2_ms"; echo "BROKER_B_REGISTER_EXTRA_MS=$b2_reg_ms"; }
    [[ -n ${sl_ms:-} ]] && { echo "SLAVE_BOOT_MS=$sl_ms"; echo "SLAVE_REGISTER_EXTRA_MS=$sl_reg_ms"; echo "SLAVE_HA_MS=$sl_ha_ms"; }
    echo "TOTAL_START_MS=$(( $(now_ms) - t0 ))"; } >>"$run/meta"
  local extra=""
  [[ -n ${b2_ms:-} ]] && extra+=", broker-b (launched alongside) boot+port ${b2_ms} ms, +${b2_reg_ms} ms until registered"
  [[ -n ${sl_ms:-} ]] && extra+=", slave boot ${sl_ms} ms, +${sl_reg_ms} ms until registered, HA connected ${sl_ha_ms} ms after launch"
  log "ready: namesrv boot ${ns_ms} ms, broker boot ${br_ms} ms (+${port_ms} ms until port accepts, +${reg_ms} ms until registered)$extra, total $(( $(now_ms) - t0 )) ms (broker launched after $(( t1 - t0 )) ms)"
  print_addrs
}

# --------------------------------------------------------------------------------------------- stop
# TERM every given role that is running at once, then wait for all of them; KILL what is still
# alive $STOP_TIMEOUT s after the TERM.
stop_roles() { # role...
  local role pid i t0 pending
  local -a roles=() pids=() done_=()
  for role in "$@"; do
    if pid=$(pid_of "$role"); then
      log "$role: TERM pid $pid"
      kill -TERM "$pid" 2>/dev/null || true
      roles+=("$role"); pids+=("$pid"); done_+=("")
    else
      log "$role: not running"
    fi
  done
  (( ${#roles[@]} )) || return 0
  t0=$(now_ms)
  while :; do
    pending=0
    for i in "${!roles[@]}"; do
      [[ -z ${done_[i]} ]] || continue
      if alive "${pids[i]}"; then
        pending=1
      else
        done_[i]=1; log "${roles[i]}: stopped after $(( $(now_ms) - t0 )) ms"
      fi
    done
    (( pending )) || return 0
    if (( $(now_ms) - t0 > STOP_TIMEOUT * 1000 )); then
      for i in "${!roles[@]}"; do
        [[ -z ${done_[i]} ]] || continue
        log "${roles[i]}: still alive after $STOP_TIMEOUT s, KILL pid ${pids[i]}"
        kill -KILL "${pids[i]}" 2>/dev/null || true
        for _ in $(seq 50); do alive "${pids[i]}" || break; sleep 0.1; done
        log "${roles[i]}: stopped after $(( $(now_ms) - t0 )) ms"
      done
      return 0
    fi
    sleep 0.2
  done
}

cmd_stop() {
  local r topo; topo=" $(topology_roles "$(run_topology)") "
  local -a brokers=()
  for r in "${ALL_BROKER_ROLES[@]}"; do
    if [[ $topo == *" $r "* ]] || pid_of "$r" >/dev/null; then brokers+=("$r"); fi
  done
  stop_roles "${brokers[@]}"
  local -a ns=(namesrv)
  if [[ $topo == *" namesrv-b "* ]] || pid_of namesrv-b >/dev/null; then ns+=(namesrv-b); fi
  stop_roles "${ns[@]}"
  return 0
}

# ----------------------------------------------------------------------------- kill / term / restart
check_role() { # role -> dies unless it belongs to the current run's topology
  local topo; topo=$(run_topology)
  [[ " $(topology_roles "$topo") " == *" $1 "* ]] || die "unknown role '$1' for topology $topo (roles: $(topology_roles "$topo"))"
}

cmd_kill() { # role
  local role=${1:-}; [[ -n $role ]] || die "usage: kill ROLE"
  current_run >/dev/null || die "no run in $RMQ_STATE"
  check_role "$role"
  local pid t0
  pid=$(pid_of "$role") || { log "$role: not running"; return 0; }
  t0=$(now_ms)
  kill -KILL "$pid" 2>/dev/null || true
  for _ in $(seq 100); do alive "$pid" || break; sleep 0.1; done
  alive "$pid" && die "$role: pid $pid still alive 10 s after SIGKILL"
  log "$role: SIGKILL pid $pid, gone after $(( $(now_ms) - t0 )) ms"
}

cmd_term() { # role
  local role=${1:-}; [[ -n $role ]] || die "usage: term ROLE"
  current_run >/dev/null || die "no run in $RMQ_STATE"
  check_role "$role"
  stop_roles "$role"
}

# Start one role of the current run again: same conf, same store (crash recovery after a kill),
# same ports. A running role is TERMed first. The previous <role>.out is kept as <role>.out.N.
cmd_restart() { # role
  local role=${1:-}; [[ -n $role ]] || die "usage: restart ROLE"
  local run; run=$(current_run) || die "no run in $RMQ_STATE (start first)"
  check_role "$role"
  if pid_of "$role" >/dev/null; then
    log "$role: running; TERM it first"
    stop_roles "$role"
  fi
  local v lib port p n=1
  v=$(meta_get VERSION); [[ -n $v ]] || die "no VERSION in $run/meta"
  lib=$(lib_dir "$v")
  [[ -f $(marker "$v") ]] || cmd_fetch "$v"
  [[ -f $(role_conf "$run" "$role") ]] || die "missing $(role_conf "$run" "$role")"
  port=$(role_port "$run" "$role")
  for p in $(role_ports "$role" "$port"); do
    port_open "$p" && die "$role: port $HOST:$p is still in use"
  done
  if [[ -f $run/$role.out ]]; then
    while [[ -e $run/$role.out.$n ]]; do n=$(( n + 1 )); done
    mv "$run/$role.out" "$run/$role.out.$n"
  fi
  log "$role: restarting RocketMQ $v on port $port (conf $(role_conf "$run" "$role"))"
  local t0 boot_ms regs=0 msg; t0=$(now_ms)
  is_broker_role "$role" && regs=$(reg_count "$run" "$role")
  launch_role "$role" "$run" "$v" "$lib"
  boot_ms=$(wait_boot "$role" "$run" "$BOOT_TIMEOUT") || die "$role did not start again"
  wait_port "$port" "$(<"$run/$role.pid")" 30 || die "$role: port $port not accepting"
  msg="boot ${boot_ms} ms, port accepts after $(( $(now_ms) - t0 )) ms"
  # A broker is only usable once it is in the name server's route again: wait for its next
  # successful registration (at boot, or 10 s later when the boot one was skipped, fact 17).
  if is_broker_role "$role"; then
    if ! pid_of namesrv >/dev/null; then
      log "WARNING: the name server is not running; $role will register when it is back"
    elif wait_registered "$run" "$role" "$regs" 45 >/dev/null; then
      msg+=", registered after $(( $(now_ms) - t0 )) ms"
    else
      log "WARNING: $role did not register with the name server within 45 s"
    fi
  fi
  # ms: replication is back once the slave's HA client is connected to the master again.
  if [[ $(run_topology) == ms && ( $role == slave || $role == broker ) ]] && pid_of slave >/dev/null && pid_of broker >/dev/null; then
    if wait_ha "$(role_port "$run" broker)" 45 >/dev/null; then
      msg+=", HA connected after $(( $(now_ms) - t0 )) ms"
    else
      log "WARNING: no HA connection from the slave to the master within 45 s"
    fi
  fi
  echo "RESTART_${role//-/_}_MS=$(( $(now_ms) - t0 ))" >>"$run/meta"
  log "$role: ready again (pid $(<"$run/$role.pid")): $msg"
  print_addrs
}

# ------------------------------------------------------------------------------------ status / env
cmd_status() {
  local ok=0 pid role run
  run=$(current_run 2>/dev/null) || run=""
  for role in $(topology_roles "$(run_topology)"); do
    if pid=$(pid_of "$role"); then
      echo "$role: running (pid $pid, RocketMQ $(meta_get VERSION '?'), $run)"
    else
      echo "$role: stopped"; ok=1
    fi
  done
  return $ok
}

cmd_env() {
  local run; run=$(current_run 2>/dev/null) || run=""
  if [[ -n $run ]]; then echo "export NAMESRV_ADDR=\"$(namesrv_addrs "$run")\""; else echo "export NAMESRV_ADDR=$HOST:$NS_PORT"; fi
  [[ -n $run && $(meta_get NAMESRVS 1) == 2 ]] && echo "export NAMESRV_B_ADDR=$HOST:$(role_port "$run" namesrv-b)"
  echo "export BROKER_ADDR=$HOST:$(meta_get BROKER_PORT "$BROKER_PORT")"
  local topo; topo=$(run_topology)
  case "$topo" in
    2m) echo "export BROKER_B_ADDR=$HOST:$(meta_get BROKER_B_PORT "$BROKER_B_PORT")" ;;
    ms) echo "export SLAVE_ADDR=$HOST:$(meta_get SLAVE_PORT "$SLAVE_PORT")" ;;
  esac
  echo "export RMQ_TOPOLOGY=$topo"
  if [[ $(meta_get ACL 0) == 1 ]]; then
    echo "export RMQ_ACL=1"
    echo "export RMQ_ACCESS_KEY=rmq_user"
    echo "export RMQ_SECRET_KEY=rmq_secret"
  else
    echo "export RMQ_ACL=0"
  fi
  local tls; tls=$(meta_get TLS off)
  echo "export RMQ_TLS=$tls"
  [[ $tls != off ]] && echo "export RMQ_TLS_CA=$(readlink -f "$CURRENT")/tls/ca.pem"
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
  # A TLS-only name server and broker: mqadmin connects with TLS (trusting any certificate).
  [[ $(meta_get TLS off) == enforcing ]] && jvm+=(-Dtls.enable=true)
  ROCKETMQ_HOME="$home" NAMESRV_ADDR="$HOST:$(meta_get NAMESRV_PORT "$NS_PORT")" \
    exec "$JAVA" "${jvm[@]}" -cp "$(lib_dir "$v")/*" org.apache.rocketmq.tools.command.MQAdminStartup "$@"
}

# start/stop/kill/term/restart hold an exclusive lock on $RMQ_STATE/.lock, so concurrent callers
# (e.g. several test binaries each running "start") serialise: the first starts the cluster, the
# others find it running. The lock fd is closed in the java children, so it is released when this
# script exits.
state_lock() {
  mkdir -p "$RMQ_STATE"
  exec 9>"$RMQ_STATE/.lock"
  flock -w 300 9 || die "timed out waiting for $RMQ_STATE/.lock"
}

usage() {
  sed -n '2,/^# VERSION:/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
  exit 2
}

main() {
  local cmd=${1:-}
  [[ $# -gt 0 ]] && shift
  case "$cmd" in
    fetch) cmd_fetch "$@" ;;
    start) state_lock; cmd_start "$@" ;;
    stop) state_lock; cmd_stop ;;
    kill) state_lock; cmd_kill "$@" ;;
    term) state_lock; cmd_term "$@" ;;
    restart) state_lock; cmd_restart "$@" ;;
    status) cmd_status ;;
    env) cmd_env ;;
    admin) cmd_admin "$@" ;;
    *) usage ;;
  esac
}
main "$@"
