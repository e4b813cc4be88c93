package rmqtest;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The Java side of the ProcessQueue comparison in scripts/bench-core-vs-java.sh, on the op pattern
 * of our `process_queue/put_then_ack_out_of_order/N` bench: N messages of 100 B put as pulls bring
 * them (lists of 32, ProcessQueue.putMessage), then each removed alone in the same scrambled order
 * ((i * 7919) % N), reading the offset to commit each time (removeMessage's result, as
 * ConsumeMessageConcurrentlyService does for a listener batch of 1). One long-lived ProcessQueue,
 * as a consumer keeps per message queue (ours is measured the same way). A warmed loop: 5 s of
 * warm-up, then 5 measured rounds of 2 s; prints ns per message.
 *
 * <pre>
 * usage: PqBench
 * </pre>
 */
public final class PqBench {
    private PqBench() {}

    private static long sink;

    public static void main(String[] args) {
        for (int cached : new int[] {1_000, 10_000}) {
            List<List<MessageExt>> pulls = new ArrayList<>();
            List<MessageExt> all = new ArrayList<>();
            for (int k = 0; k * 32 < cached; k++) {
                List<MessageExt> pull = new ArrayList<>();
                for (int i = 0; i < 32 && k * 32 + i < cached; i++) {
                    MessageExt m = new MessageExt();
                    m.setTopic("T");
                    m.setBody(new byte[100]);
                    m.setQueueOffset(k * 32 + i);
                    pull.add(m);
                    all.add(m);
                }
                pulls.add(pull);
            }
            List<List<MessageExt>> removals = new ArrayList<>();
            for (int i = 0; i < cached; i++) {
                removals.add(Collections.singletonList(all.get((int) ((i * 7919L) % cached))));
            }
            run(pulls, removals, 5_000);
            for (int round = 0; round < 5; round++) {
                double ns = run(pulls, removals, 2_000) / cached;
                System.out.printf("{\"client\":\"java\",\"bench\":\"put_then_ack_out_of_order/%d\",\"round\":%d,\"ns_per_msg\":%.1f}%n",
                    cached, round, ns);
            }
        }
        System.err.println(sink);
    }

    /** Fill and drain one ProcessQueue for `ms` milliseconds; nanoseconds per fill and drain. */
    private static double run(List<List<MessageExt>> pulls, List<List<MessageExt>> removals, long ms) {
        long end = System.nanoTime() + ms * 1_000_000;
        long n = 0;
        ProcessQueue pq = new ProcessQueue();
        long started = System.nanoTime();
        while (System.nanoTime() < end) {
            for (List<MessageExt> pull : pulls) {
                pq.putMessage(pull);
            }
            long w = 0;
            for (List<MessageExt> one : removals) {
                w += pq.removeMessage(one);
            }
            sink += w;
            n++;
        }
        return (double) (System.nanoTime() - started) / n;
    }
}
