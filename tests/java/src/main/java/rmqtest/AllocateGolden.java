package rmqtest;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;

import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragelyByCircle;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueByConfig;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueByMachineRoom;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueConsistentHash;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Golden data for queue allocation: runs the REAL allocation strategies of rocketmq-client (the
 * remoting client, org.apache.rocketmq.client.consumer.rebalance.*) on a deterministic set of
 * scenarios and writes every result as JSON lines, for tests/allocate_parity.rs.
 *
 * <pre>
 * usage: AllocateGolden OUT_PATH [SEED]
 * </pre>
 *
 * A scenario is (mqAll, cidAll). Both are sorted exactly as RebalanceImpl.rebalanceByTopic does
 * (Collections.sort: MessageQueue.compareTo, String.compareTo). For every distinct cid of cidAll plus
 * one stranger cid (not in cidAll) and every strategy below, one line:
 *
 * <pre>
 * {"scenario":N,"strategy":"AVG","param":null,"mqAll":[["T","broker-a",0],...],"cidAll":[...],
 *  "current":"...","result":[["T","broker-a",3],...]}
 * </pre>
 *
 * or, when Java threw, {@code "error":"IllegalArgumentException: ..."} instead of "result". param is:
 * null for AVG and AVG_BY_CIRCLE; the virtual node count for CONSISTENT_HASH; the consumer idcs
 * (sorted array of strings) for MACHINE_ROOM; the fixed queue list (array of triples) for CONFIG.
 *
 * Strategies for every scenario: AVG, AVG_BY_CIRCLE, CONSISTENT_HASH 1/10/33, MACHINE_ROOM {hz} and
 * {hz,sh}, CONFIG with one fixed list. The small hand-written edge scenarios add CONSISTENT_HASH 0/2/100
 * and MACHINE_ROOM {}, {"", "HZ"} and {bj,hz,sh}.
 *
 * Scenarios: 15 hand-written edge cases (single queue, more consumers than queues, n == m, numeric vs
 * lexicographic order, several topics, a stranger that is a prefix of a member, empty mqAll, empty
 * cidAll, duplicate cids, an empty cid, no machine-room brokers, every way String.split("@") treats
 * odd broker names, 40 queues x 12 consumers), then RANDOM_SCENARIOS seeded random ones (1..3
 * brokers, 1..40 queues, 1..12 consumers; half of them small). Every line repeats mqAll and cidAll
 * so that it stands alone, which is what limits the scenario count under the 2 MB cap.
 *
 * Output is byte-for-byte deterministic for a seed (no hash-ordered iteration is written). The
 * file is written to OUT_PATH.tmp and renamed; the run fails if it would exceed 2,000,000 bytes.
 */
public final class AllocateGolden {
    static final long DEFAULT_SEED = 0x5EED_A110CL;
    /** Random scenarios after the hand-written ones; sized to keep the file under 2 MB. */
    static final int RANDOM_SCENARIOS = 36;
    static final long MAX_BYTES = 2_000_000L;

    static final String[] TOPICS = {"T", "TopicTest", "%RETRY%cg_orders", "orders.v2", "A_b-C"};
    /** Mostly machine-room names, some plain ones and a few the "@" split treats specially. */
    static final String[] BROKERS = {
        "hz@broker-a", "hz@broker-b", "sh@broker-b", "sh@broker-c", "bj@broker-d", "plain-broker",
        "broker-a", "broker-b", "hz@sh@broker-x", "sh@broker-e@", "hz@@", "@hz-broker", "HZ@broker-f",
        "Broker-A", "broker-a-1",
    };
    static final String[] ODD_CIDS = {
        "consumer-1", "consumer-10", "consumer-2", "a", "Z", "10.0.0.1@DEFAULT", "172.16.0.3@12@unitA",
        "host-with-dashes@1", "c9", "c10", "fe80::1@77#1", "10.0.0.1@1234#99", "10.0.0.1@1234#100",
        "CID_upper", "x@y@z#1#2",
    };

    record Strategy(String name, Object param, AllocateMessageQueueStrategy impl) {
    }

    record Scenario(List<MessageQueue> mqAll, List<String> cidAll, String stranger, boolean extraStrategies) {
    }

    public static void main(String[] args) throws IOException {
        if (args.length < 1 || args.length > 2) {
            System.err.println("usage: AllocateGolden OUT_PATH [SEED]");
            System.exit(2);
        }
        Path out = Paths.get(args[0]);
        long seed = args.length > 1 ? Long.parseLong(args[1]) : DEFAULT_SEED;
        Random rnd = new Random(seed);

        List<Scenario> scenarios = new ArrayList<>(edgeScenarios());
        for (int i = 0; i < RANDOM_SCENARIOS; i++) {
            scenarios.add(randomScenario(rnd));
        }

        List<MessageQueue> configList = List.of(
            new MessageQueue("T", "broker-b", 3), new MessageQueue("T", "broker-a", 0),
            new MessageQueue("OtherTopic", "hz@broker-a", 7));

        Path tmp = out.resolveSibling(out.getFileName() + ".tmp");
        long lines = 0;
        long errors = 0;
        try (Writer w = new BufferedWriter(new OutputStreamWriter(Files.newOutputStream(tmp), StandardCharsets.UTF_8))) {
            for (int s = 0; s < scenarios.size(); s++) {
                Scenario sc = scenarios.get(s);
                // exactly as RebalanceImpl: copy the set into a list, sort both
                List<MessageQueue> mqAll = new ArrayList<>(sc.mqAll());
                Collections.sort(mqAll);
                List<String> cidAll = new ArrayList<>(sc.cidAll());
                Collections.sort(cidAll);
                String mqJson = queuesJson(mqAll);
                String cidJson = stringsJson(cidAll);

                List<String> currents = new ArrayList<>(new LinkedHashSet<>(cidAll));
                if (sc.stranger() != null) {
                    if (cidAll.contains(sc.stranger())) {
                        throw new IllegalStateException("stranger " + sc.stranger() + " is in cidAll");
                    }
                    currents.add(sc.stranger());
                }
                for (Strategy st : strategies(configList, sc.extraStrategies())) {
                    for (String current : currents) {
                        StringBuilder b = new StringBuilder(256 + mqJson.length());
                        b.append("{\"scenario\":").append(s);
                        b.append(",\"strategy\":").append(str(st.name()));
                        b.append(",\"param\":").append(paramJson(st.param()));
                        b.append(",\"mqAll\":").append(mqJson);
                        b.append(",\"cidAll\":").append(cidJson);
                        b.append(",\"current\":").append(str(current));
                        try {
                            // fresh copies: a strategy must not see another call's mutations
                            List<MessageQueue> result = st.impl().allocate("cg_golden", current,
                                new ArrayList<>(mqAll), new ArrayList<>(cidAll));
                            b.append(",\"result\":").append(queuesJson(result));
                        } catch (Exception e) {
                            errors++;
                            b.append(",\"error\":").append(str(e.getClass().getSimpleName() + ": " + e.getMessage()));
                        }
                        b.append("}\n");
                        w.write(b.toString());
                        lines++;
                    }
                }
            }
        }
        long size = Files.size(tmp);
        if (size > MAX_BYTES) {
            Files.delete(tmp);
            throw new IllegalStateException("output is " + size + " bytes, over " + MAX_BYTES + "; lower RANDOM_SCENARIOS");
        }
        Files.move(tmp, out, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        System.err.printf("AllocateGolden: %d scenarios, %d lines (%d errors), %d bytes -> %s%n",
            scenarios.size(), lines, errors, size, out);
    }

    static List<Strategy> strategies(List<MessageQueue> configList, boolean extra) {
        List<Strategy> v = new ArrayList<>();
        v.add(new Strategy("AVG", null, new AllocateMessageQueueAveragely()));
        v.add(new Strategy("AVG_BY_CIRCLE", null, new AllocateMessageQueueAveragelyByCircle()));
        int[] vnodes = extra ? new int[] {0, 1, 2, 10, 33, 100} : new int[] {1, 10, 33};
        for (int n : vnodes) {
            v.add(new Strategy("CONSISTENT_HASH", n, new AllocateMessageQueueConsistentHash(n)));
        }
        List<List<String>> rooms = new ArrayList<>();
        rooms.add(List.of("hz"));
        rooms.add(List.of("hz", "sh"));
        if (extra) {
            rooms.add(List.of());
            rooms.add(List.of("", "HZ"));
            rooms.add(List.of("bj", "hz", "sh"));
        }
        for (List<String> idcs : rooms) {
            AllocateMessageQueueByMachineRoom mr = new AllocateMessageQueueByMachineRoom();
            mr.setConsumeridcs(new TreeSet<>(idcs));
            v.add(new Strategy("MACHINE_ROOM", idcs, mr));
        }
        AllocateMessageQueueByConfig cfg = new AllocateMessageQueueByConfig();
        cfg.setMessageQueueList(new ArrayList<>(configList));
        v.add(new Strategy("CONFIG", configList, cfg));
        return v;
    }

    // ---- scenarios ----

    static List<MessageQueue> queues(String topic, String broker, int... ids) {
        List<MessageQueue> v = new ArrayList<>();
        for (int id : ids) {
            v.add(new MessageQueue(topic, broker, id));
        }
        return v;
    }

    static int[] range(int n) {
        int[] r = new int[n];
        for (int i = 0; i < n; i++) {
            r[i] = i;
        }
        return r;
    }

    static List<String> realisticCids(int n, int base) {
        List<String> v = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            v.add("10.0.0." + (base + i * 7 % 250) + "@" + (4000 + i * 13) + "#" + (88123456789012L + i * 1_000_003L));
        }
        return v;
    }

    static List<Scenario> edgeScenarios() {
        List<Scenario> v = new ArrayList<>();
        String s = "10.0.0.250@9#1";
        // single queue, single consumer; then single queue, five consumers
        v.add(new Scenario(queues("T", "broker-a", 0), List.of("10.0.0.1@100#1"), s, true));
        v.add(new Scenario(queues("T", "hz@broker-a", 0), realisticCids(5, 3), s, true));
        // more consumers than queues (3 queues, 12 consumers), and n == m
        List<MessageQueue> three = new ArrayList<>(queues("T", "hz@broker-a", 0, 1));
        three.addAll(queues("T", "sh@broker-b", 0));
        v.add(new Scenario(three, realisticCids(12, 1), s, false));
        List<MessageQueue> eight = new ArrayList<>(queues("T", "hz@broker-a", range(4)));
        eight.addAll(queues("T", "sh@broker-b", range(4)));
        v.add(new Scenario(eight, realisticCids(8, 20), s, false));
        // numeric vs lexicographic: queue ids 2 < 10 < 100, cids c1 < c10 < c2 < c9
        v.add(new Scenario(queues("T", "broker-a", 100, 2, 10, 1, 0, 99999, 20), List.of("c9", "c2", "c10", "c1"), "c", true));
        // several topics in one mqAll (sort by topic first), upper case before lower case
        List<MessageQueue> mixed = new ArrayList<>(queues("b-topic", "broker-a", range(3)));
        mixed.addAll(queues("A-topic", "broker-b", range(3)));
        mixed.addAll(queues("a-topic", "hz@broker-a", range(3)));
        mixed.addAll(queues("a-topic", "Broker-A", range(2)));
        v.add(new Scenario(mixed, List.of("b@1", "A@1", "a@1"), "B@1", true));
        // stranger that is a prefix of a member
        v.add(new Scenario(queues("T", "hz@broker-a", range(6)), List.of("10.0.0.1@12#3", "10.0.0.1@12#34"), "10.0.0.1@12#", true));
        // empty mqAll (Java: "mqAll is null or mqAll empty") and empty cidAll (only the stranger asks)
        v.add(new Scenario(List.of(), realisticCids(3, 5), s, true));
        v.add(new Scenario(queues("T", "hz@broker-a", range(4)), List.of(), s, true));
        // duplicate client ids (never sent by a broker, but Java tolerates them)
        v.add(new Scenario(queues("T", "hz@broker-a", range(7)), List.of("c1", "c2", "c1", "c3"), "c4", true));
        // an empty client id in cidAll, which is also asked as current (Java: "currentCID is empty")
        v.add(new Scenario(queues("T", "sh@broker-b", range(5)), List.of("", "c1", "c2"), "c3", true));
        // MACHINE_ROOM: no room brokers at all
        List<MessageQueue> plain = new ArrayList<>(queues("T", "broker-a", range(5)));
        plain.addAll(queues("T", "plain-broker", range(5)));
        v.add(new Scenario(plain, realisticCids(3, 9), s, false));
        // MACHINE_ROOM: every way String.split("@") can go (trailing empties dropped, leading kept)
        List<MessageQueue> odd = new ArrayList<>();
        for (String b : new String[] {"sh@broker-e@", "hz@@", "hz@@broker", "@hz", "@", "", "hz@sh@broker-x",
            "HZ@broker-f", "hz@broker-a", "sh@broker-b@@", "@@hz", "bj@broker-d", "hz"}) {
            odd.addAll(queues("T", b, range(3)));
        }
        v.add(new Scenario(odd, realisticCids(4, 30), s, false));
        v.add(new Scenario(odd, List.of("c1"), s, true));
        // the largest: 40 queues over 3 brokers, 12 consumers
        List<MessageQueue> big = new ArrayList<>(queues("T", "hz@broker-a", range(16)));
        big.addAll(queues("T", "sh@broker-b", range(16)));
        big.addAll(queues("T", "plain-broker", range(8)));
        v.add(new Scenario(big, realisticCids(12, 40), s, false));
        return v;
    }

    static Scenario randomScenario(Random rnd) {
        // "T" half the time: the topic only matters to CONSISTENT_HASH, and short lines fit more scenarios
        String topic = rnd.nextBoolean() ? "T" : TOPICS[rnd.nextInt(TOPICS.length)];
        int brokers = 1 + rnd.nextInt(3);
        // Half the scenarios are small (1..12 queues, 1..6 consumers): a scenario costs about
        // queues x consumers bytes, and small ones let more scenarios fit the 2 MB file.
        boolean small = rnd.nextBoolean();
        int total = small ? 1 + rnd.nextInt(12) : 1 + rnd.nextInt(40);
        brokers = Math.min(brokers, total);
        List<String> pool = new ArrayList<>(Arrays.asList(BROKERS));
        Collections.shuffle(pool, rnd);
        List<MessageQueue> mqs = new ArrayList<>();
        int left = total;
        for (int b = 0; b < brokers; b++) {
            int k = b == brokers - 1 ? left : 1 + rnd.nextInt(left - (brokers - b - 1));
            left -= k;
            String broker = pool.get(b);
            if (rnd.nextInt(5) == 0) {
                // non-contiguous ids (e.g. read queues only partly visible)
                Set<Integer> ids = new TreeSet<>();
                while (ids.size() < k) {
                    ids.add(rnd.nextInt(64));
                }
                for (int id : ids) {
                    mqs.add(new MessageQueue(topic, broker, id));
                }
            } else {
                mqs.addAll(queues(topic, broker, range(k)));
            }
        }
        // the set's iteration order is irrelevant: it is sorted; shuffle to make that explicit
        Collections.shuffle(mqs, rnd);

        int m = small ? 1 + rnd.nextInt(6) : 1 + rnd.nextInt(12);
        Set<String> cids = new LinkedHashSet<>();
        while (cids.size() < m) {
            int kind = rnd.nextInt(10);
            if (kind < 7) {
                cids.add("10.0.0." + (1 + rnd.nextInt(254)) + "@" + (1000 + rnd.nextInt(60000)) + "#"
                    + (1_000_000_000L + (rnd.nextLong() & 0xFF_FFFF_FFFFL)));
            } else if (kind < 9) {
                cids.add(ODD_CIDS[rnd.nextInt(ODD_CIDS.length)]);
            } else {
                // same host and pid, different instance
                cids.add("10.0.0.7@4242#" + rnd.nextInt(100));
            }
        }
        String stranger;
        do {
            stranger = "10.0.1." + (1 + rnd.nextInt(254)) + "@" + rnd.nextInt(100000) + "#" + rnd.nextInt(1000);
        } while (cids.contains(stranger));
        List<String> cidList = new ArrayList<>(cids);
        Collections.shuffle(cidList, rnd);
        return new Scenario(mqs, cidList, stranger, false);
    }

    // ---- JSON ----

    static String paramJson(Object p) {
        if (p == null) {
            return "null";
        }
        if (p instanceof Integer i) {
            return i.toString();
        }
        List<?> l = (List<?>) p;
        if (!l.isEmpty() && l.get(0) instanceof MessageQueue) {
            @SuppressWarnings("unchecked")
            List<MessageQueue> q = (List<MessageQueue>) l;
            return queuesJson(q);
        }
        @SuppressWarnings("unchecked")
        List<String> s = (List<String>) l;
        return stringsJson(s);
    }

    static String queuesJson(List<MessageQueue> qs) {
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < qs.size(); i++) {
            MessageQueue q = qs.get(i);
            if (i > 0) {
                b.append(',');
            }
            b.append('[').append(str(q.getTopic())).append(',').append(str(q.getBrokerName())).append(',')
                .append(q.getQueueId()).append(']');
        }
        return b.append(']').toString();
    }

    static String stringsJson(List<String> ss) {
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < ss.size(); i++) {
            if (i > 0) {
                b.append(',');
            }
            b.append(str(ss.get(i)));
        }
        return b.append(']').toString();
    }

    static String str(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                default -> {
                    if (c < 0x20 || c > 0x7e) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    private AllocateGolden() {
    }
}
