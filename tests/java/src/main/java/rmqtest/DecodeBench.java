package rmqtest;

import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.List;

import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The Java side of scripts/bench-core-vs-java.sh: decode the same pull body our codec bench
 * decodes (written by `cargo bench --bench codec` with RMQ_BENCH_BODY_OUT) the way Java's consumer
 * does (MessageDecoder.decodesBatch with isClient, as PullAPIWrapper.processPullResult), then read
 * each message's id (MessageClientExt.getMsgId: UNIQ_KEY) and tags. A warmed loop: 5 s of warm-up, then 5
 * measured rounds of 2 s; prints ns per message for decode alone and decode + the two reads.
 *
 * <pre>
 * usage: DecodeBench BODY_FILE
 * </pre>
 */
public final class DecodeBench {
    private DecodeBench() {}

    private static long sink;

    public static void main(String[] args) throws Exception {
        byte[] body = Files.readAllBytes(Paths.get(args[0]));
        int per = MessageDecoder.decodesBatch(ByteBuffer.wrap(body), true, true, true).size();
        run(body, false, 5_000);
        run(body, true, 5_000);
        for (int round = 0; round < 5; round++) {
            double plain = run(body, false, 2_000) / per;
            double reads = run(body, true, 2_000) / per;
            System.out.printf("{\"client\":\"java\",\"round\":%d,\"decode_ns\":%.1f,\"decode_read_ns\":%.1f}%n",
                round, plain, reads);
        }
        System.err.println(sink);
    }

    /** Decode for `ms` milliseconds; nanoseconds per body. */
    private static double run(byte[] body, boolean read, long ms) {
        long end = System.nanoTime() + ms * 1_000_000;
        long n = 0;
        long started = System.nanoTime();
        while (System.nanoTime() < end) {
            for (int i = 0; i < 100; i++) {
                List<MessageExt> msgs = MessageDecoder.decodesBatch(ByteBuffer.wrap(body), true, true, true);
                if (read) {
                    for (MessageExt m : msgs) {
                        // MessageClientExt.getMsgId reads UNIQ_KEY, as our msg_id() does.
                        String id = m.getMsgId();
                        String tags = m.getTags();
                        sink += (id == null ? 0 : id.length()) + (tags == null ? 0 : tags.length());
                    }
                } else {
                    sink += msgs.size();
                }
                n++;
            }
        }
        return (double) (System.nanoTime() - started) / n;
    }
}
