package rmqtest;

import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;

/**
 * The Java side of scripts/bench-clients.sh: a DefaultMQPushConsumer with its defaults (concurrent,
 * consumeThreadMin 20, consumeMessageBatchMaxSize 1, pullBatchSize 32) consumes COUNT messages of
 * TOPIC as a new GROUP from the first offset, with a listener that counts (and with "latency"
 * records each message's born-to-listener latency). Prints one JSON line: the count, the
 * milliseconds from start() to the last message, and with "latency" the latency p50/p99 in ms.
 *
 * <pre>
 * usage: ConsumeBench NAMESRV TOPIC GROUP COUNT [pop] [latency]
 * </pre>
 *
 * pop: setClientRebalance(false), so a group switched to POP on the broker pops.
 */
public final class ConsumeBench {
    private ConsumeBench() {}

    public static void main(String[] args) throws Exception {
        boolean pop = false;
        boolean latency = false;
        for (int i = 4; i < args.length; i++) {
            pop |= "pop".equals(args[i]);
            latency |= "latency".equals(args[i]);
        }
        if (args.length < 4 || args.length > 6 || args.length - 4 != (pop ? 1 : 0) + (latency ? 1 : 0)) {
            System.err.println("usage: ConsumeBench NAMESRV TOPIC GROUP COUNT [pop] [latency]");
            System.exit(2);
        }
        String namesrv = args[0];
        String topic = args[1];
        String group = args[2];
        long count = Long.parseLong(args[3]);
        AtomicLong seen = new AtomicLong();
        // One slot per message, no lock shared by the listener threads (as the Rust bench); none
        // without "latency", where the listener only counts.
        AtomicIntegerArray latencies = new AtomicIntegerArray(latency ? (int) Math.min(count, 10_000_000) : 0);
        CountDownLatch done = new CountDownLatch(1);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        if (pop) {
            consumer.setClientRebalance(false);
        }
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long first = seen.getAndAdd(msgs.size());
            if (first < latencies.length()) {
                long now = System.currentTimeMillis();
                for (int i = 0; i < msgs.size() && first + i < latencies.length(); i++) {
                    latencies.set((int) (first + i), (int) Math.max(0, now - msgs.get(i).getBornTimestamp()) + 1);
                }
            }
            if (first + msgs.size() >= count) {
                done.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        long started = System.nanoTime();
        consumer.start();
        boolean finished = done.await(300, TimeUnit.SECONDS);
        long ms = (System.nanoTime() - started) / 1_000_000;
        consumer.shutdown();
        if (!finished) {
            System.err.println("ConsumeBench: only " + seen.get() + " of " + count + " in 300 s");
            System.exit(1);
        }
        int[] l = new int[latencies.length()];
        int n = 0;
        for (int i = 0; i < l.length; i++) {
            if (latencies.get(i) > 0) {
                l[n++] = latencies.get(i) - 1;
            }
        }
        Arrays.sort(l, 0, n);
        int p50 = n == 0 ? 0 : l[(int) ((n - 1) * 0.5)];
        int p99 = n == 0 ? 0 : l[(int) ((n - 1) * 0.99)];
        String lat = latency ? String.format(",\"p50_ms\":%d,\"p99_ms\":%d", p50, p99) : "";
        System.out.printf("{\"client\":\"java\",\"count\":%d,\"ms\":%d%s}%n", seen.get(), ms, lat);
        System.exit(0);
    }
}
