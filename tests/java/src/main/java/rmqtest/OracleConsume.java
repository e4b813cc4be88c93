package rmqtest;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel;

/**
 * The oracle of the differential suite (adapters/oracle): Java's DefaultMQPushConsumer configured
 * from key=value arguments, writing one JSON line per message its listener sees to stdout, and
 * shutting down gracefully when stdin says "stop" (or closes).
 *
 * <pre>
 * usage: OracleConsume namesrv=ADDR group=G topic=T [expr=TAG-EXPR | sql=SQL92] [from=first|last|timestamp]
 *        [timestamp=yyyyMMddHHmmss] [model=clustering|broadcasting] [orderly=true] [fail=N]
 *        [suspend=true] [maxReconsume=N] [instance=NAME] [batch=N] [threads=N] [namespace=NS]
 *        [clientRebalance=false]
 * </pre>
 *
 * fail=N: a message is answered RECONSUME_LATER while its reconsumeTimes is below N (fail=-1:
 * always). suspend=true (orderly): the first delivery of each message answers
 * SUSPEND_CURRENT_QUEUE_A_MOMENT. Lines: {"broker","queue","offset","key","body","reconsume",
 * "topic","tags","ms"}; "started" and "stopped" go to stderr.
 */
public final class OracleConsume {
    private OracleConsume() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (String arg : args) {
            int eq = arg.indexOf('=');
            if (eq <= 0) {
                System.err.println("bad argument (want key=value): " + arg);
                System.exit(2);
            }
            a.put(arg.substring(0, eq), arg.substring(eq + 1));
        }
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(a.get("group"));
        c.setNamesrvAddr(a.get("namesrv"));
        if (a.containsKey("instance")) {
            c.setInstanceName(a.get("instance"));
        }
        if (a.containsKey("namespace")) {
            c.setNamespace(a.get("namespace"));
        }
        switch (a.getOrDefault("from", "last")) {
            case "first" -> c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            case "timestamp" -> {
                c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_TIMESTAMP);
                c.setConsumeTimestamp(a.get("timestamp"));
            }
            default -> c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
        }
        if ("broadcasting".equals(a.get("model"))) {
            c.setMessageModel(MessageModel.BROADCASTING);
        }
        if (a.containsKey("maxReconsume")) {
            c.setMaxReconsumeTimes(Integer.parseInt(a.get("maxReconsume")));
        }
        if (a.containsKey("clientRebalance")) {
            // false: the broker assigns queues and, for a group switched to POP, Java pops.
            c.setClientRebalance(Boolean.parseBoolean(a.get("clientRebalance")));
        }
        if (a.containsKey("batch")) {
            c.setConsumeMessageBatchMaxSize(Integer.parseInt(a.get("batch")));
        }
        if (a.containsKey("threads")) {
            int n = Integer.parseInt(a.get("threads"));
            c.setConsumeThreadMin(n);
            c.setConsumeThreadMax(n);
        }
        if (a.containsKey("sql")) {
            c.subscribe(a.get("topic"), MessageSelector.bySql(a.get("sql")));
        } else {
            c.subscribe(a.get("topic"), a.getOrDefault("expr", "*"));
        }
        int fail = Integer.parseInt(a.getOrDefault("fail", "0"));
        boolean suspend = Boolean.parseBoolean(a.getOrDefault("suspend", "false"));
        Map<String, AtomicInteger> seen = new ConcurrentHashMap<>();
        if (Boolean.parseBoolean(a.getOrDefault("orderly", "false"))) {
            c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                boolean first = false;
                for (MessageExt m : msgs) {
                    print(out, m, ctx.getMessageQueue());
                    first |= seen.computeIfAbsent(m.getMsgId(), k -> new AtomicInteger()).getAndIncrement() == 0;
                }
                if (suspend && first) {
                    ctx.setSuspendCurrentQueueTimeMillis(100);
                    return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                boolean later = false;
                for (MessageExt m : msgs) {
                    print(out, m, ctx.getMessageQueue());
                    later |= fail < 0 || m.getReconsumeTimes() < fail;
                }
                return later ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }
        c.start();
        System.err.println("started");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null && !"stop".equals(line.trim())) {
            // wait
        }
        c.shutdown();
        System.err.println("stopped");
        System.exit(0);
    }

    private static void print(PrintStream out, MessageExt m, MessageQueue q) {
        String tags = m.getTags();
        String line = "{\"broker\":" + str(q.getBrokerName()) + ",\"queue\":" + q.getQueueId()
            + ",\"offset\":" + m.getQueueOffset() + ",\"key\":" + str(m.getMsgId())
            + ",\"body\":" + str(new String(m.getBody(), StandardCharsets.UTF_8))
            + ",\"reconsume\":" + m.getReconsumeTimes() + ",\"topic\":" + str(m.getTopic())
            + ",\"tags\":" + (tags == null ? "null" : str(tags)) + ",\"ms\":" + System.currentTimeMillis() + "}";
        synchronized (out) {
            out.println(line);
        }
    }

    private static String str(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            switch (ch) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (ch < 0x20) {
                        b.append(String.format("\\u%04x", (int) ch));
                    } else {
                        b.append(ch);
                    }
                }
            }
        }
        return b.append('"').toString();
    }
}
