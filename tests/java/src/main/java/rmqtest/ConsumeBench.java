package rmqtest;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;

/**
 * The Java side of scripts/bench-vs-java.sh: a DefaultMQPushConsumer with its defaults (concurrent,
 * consumeThreadMin 20, consumeMessageBatchMaxSize 1, pullBatchSize 32) consumes COUNT messages of
 * TOPIC as a new GROUP from the first offset, with a listener that only counts. Prints one JSON line:
 * the count and the milliseconds from start() to the last message.
 *
 * <pre>
 * usage: ConsumeBench NAMESRV TOPIC GROUP COUNT
 * </pre>
 */
public final class ConsumeBench {
    private ConsumeBench() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: ConsumeBench NAMESRV TOPIC GROUP COUNT");
            System.exit(2);
        }
        String namesrv = args[0];
        String topic = args[1];
        String group = args[2];
        long count = Long.parseLong(args[3]);
        AtomicLong seen = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            if (seen.addAndGet(msgs.size()) >= count) {
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
        System.out.printf("{\"client\":\"java\",\"count\":%d,\"ms\":%d}%n", seen.get(), ms);
        System.exit(0);
    }
}
