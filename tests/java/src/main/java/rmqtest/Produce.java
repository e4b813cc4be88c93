package rmqtest;

import java.io.IOException;
import java.io.Writer;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.compression.CompressionType;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.NamespaceUtil;

/**
 * Sends a fixed, deterministic set of messages to queue 0 of TOPIC with the real Java remoting client
 * and writes one JSON object per sent message (JSON lines, in send = queue order) to MANIFEST.
 *
 * <pre>
 * usage: Produce NAMESRV TOPIC MANIFEST [ZLIB|LZ4|ZSTD]
 * </pre>
 *
 * With {@code -Drmqtest.namespace=NS} the producer has that namespace ({@code setNamespace}); with
 * {@code -Drmqtest.trace=true} it traces its sends (enableMsgTrace) to RMQ_SYS_TRACE_TOPIC, or to
 * {@code -Drmqtest.traceTopic=T} (customizedTraceTopic).
 *
 * Messages (all on queue 0, in this order):
 * <ol>
 * <li>"small": tags TagA, keys "k1 k2", user properties color=red and unicode=中文😀, body "hello"</li>
 * <li>"big": 6000 bytes of repeating ASCII text, tags Big; compressed by the producer (≥ 4096 bytes)</li>
 * <li>"random": 5000 bytes from new java.util.Random(42).nextBytes, no tags, no keys; also ≥ 4096 bytes,
 *     so the producer compresses it too</li>
 * <li>"batch" x3: one send(Collection, MessageQueue): tags B0..B2, bodies batch-0..batch-2, user property
 *     idx=i; batches are never compressed</li>
 * </ol>
 *
 * Manifest fields (one JSON object per line, in queue order):
 * <ul>
 * <li>index (0..5), kind (small|big|random|batch), topic, brokerName, queueId (always 0), queueOffset
 *     (from SendResult; batch: first offset + position)</li>
 * <li>msgId: the UNIQ_KEY the producer gave the message (SendResult.getMsgId(); for the batch, the i-th
 *     entry of its comma-separated list)</li>
 * <li>consumerMsgId: the id a Java consumer reports (MessageClientExt.getMsgId() = UNIQ_KEY property as
 *     decoded). Differs from msgId for batch messages: the broker appends the batch's own properties
 *     (with the batch's own UNIQ_KEY) after each message's properties, and the last duplicate key wins.</li>
 * <li>offsetMsgId, tags, keys ("k1 k2" or null), bodyBase64 (original, uncompressed), bodyLen,
 *     userProperties (object), flag, waitStoreMsgOK, batch</li>
 * <li>compressed (whether the stored body is compressed), compressType (ZLIB|LZ4|ZSTD when compressed,
 *     else NONE), producerCompressType (the producer's setting), storedSysFlag (sysFlag as stored and as
 *     sent in a pull: 0, or 0x301 ZLIB / 0x101 LZ4 / 0x201 ZSTD), sendStatus</li>
 * <li>javaView: the message as read back from the broker (VIEW_MESSAGE_BY_ID) and decoded by the Java
 *     client: msgId, offsetMsgId, queueId, queueOffset, commitLogOffset, storeSize, sysFlag (with 0x1
 *     cleared after decompression, as Java does), bodyCRC (of the stored bytes), flag, reconsumeTimes,
 *     bornTimestamp, storeTimestamp, bornHost, storeHost, properties (all, including system ones)</li>
 * </ul>
 */
public final class Produce {
    static final String GROUP = "rmq_rust_test_producer";
    static final int COMPRESS_OVER = 4096;

    public static void main(String[] args) {
        int rc;
        try {
            rc = run(args);
        } catch (Throwable t) {
            System.err.println("Produce: FAILED: " + t);
            t.printStackTrace(System.err);
            rc = 1;
        }
        System.exit(rc);
    }

    /** One planned message plus what the manifest needs about it. */
    static final class Planned {
        final String kind;
        final Message msg;
        final byte[] body;
        final List<String> keys;
        final Map<String, String> userProps = new LinkedHashMap<>();

        Planned(String kind, String topic, String tags, byte[] body, List<String> keys) {
            this.kind = kind;
            this.body = body.clone();
            this.keys = keys;
            this.msg = tags == null ? new Message(topic, body.clone()) : new Message(topic, tags, body.clone());
            if (keys != null) {
                msg.setKeys(keys);
            }
        }

        Planned prop(String k, String v) {
            userProps.put(k, v);
            msg.putUserProperty(k, v);
            return this;
        }
    }

    /** What the send returned for one message. */
    static final class Sent {
        final int index;
        final Planned p;
        final MessageQueue mq;
        final long queueOffset;
        final String msgId;
        final String offsetMsgId;
        final boolean batch;
        final boolean compressed;
        final String compressType;
        final SendStatus status;

        Sent(int index, Planned p, MessageQueue mq, long queueOffset, String msgId, String offsetMsgId,
            boolean batch, boolean compressed, String compressType, SendStatus status) {
            this.index = index;
            this.p = p;
            this.mq = mq;
            this.queueOffset = queueOffset;
            this.msgId = msgId;
            this.offsetMsgId = offsetMsgId;
            this.batch = batch;
            this.compressed = compressed;
            this.compressType = compressType;
            this.status = status;
        }
    }

    static int run(String[] args) throws Exception {
        if (args.length < 3 || args.length > 4) {
            System.err.println("usage: Produce NAMESRV TOPIC MANIFEST [ZLIB|LZ4|ZSTD]");
            return 2;
        }
        String namesrv = args[0];
        String topic = args[1];
        Path manifest = Paths.get(args[2]);
        String ctName = (args.length == 4 ? args[3] : System.getProperty("rocketmq.message.compressType", "ZLIB"))
            .toUpperCase(Locale.ROOT);
        if (!Arrays.asList("ZLIB", "LZ4", "ZSTD").contains(ctName)) {
            System.err.println("compress type must be ZLIB, LZ4 or ZSTD, got " + ctName);
            return 2;
        }
        // DefaultMQProducer reads this property in a field initializer; set it before constructing, and
        // also set the type explicitly below.
        System.setProperty("rocketmq.message.compressType", ctName);
        CompressionType compressionType = CompressionType.of(ctName);

        List<Planned> singles = new ArrayList<>();
        singles.add(new Planned("small", topic, "TagA", "hello".getBytes(StandardCharsets.UTF_8),
            Arrays.asList("k1", "k2")).prop("color", "red").prop("unicode", "中文😀"));
        singles.add(new Planned("big", topic, "Big", bigText(6000), null));
        byte[] random = new byte[5000];
        new Random(42).nextBytes(random);
        singles.add(new Planned("random", topic, null, random, null));
        List<Planned> batch = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            batch.add(new Planned("batch", topic, "B" + i, ("batch-" + i).getBytes(StandardCharsets.UTF_8), null)
                .prop("idx", Integer.toString(i)));
        }

        // -Drmqtest.trace=true: Java's message trace (enableMsgTrace), its Pub records to
        // RMQ_SYS_TRACE_TOPIC or -Drmqtest.traceTopic (customizedTraceTopic), flushed by shutdown().
        DefaultMQProducer producer = new DefaultMQProducer(
            GROUP, Boolean.getBoolean("rmqtest.trace"), System.getProperty("rmqtest.traceTopic"));
        producer.setNamesrvAddr(namesrv); // explicit: never the HTTP name-server lookup
        // -Drmqtest.namespace=NS: Java's namespace (TOPIC travels as NS%TOPIC).
        String namespace = System.getProperty("rmqtest.namespace", "");
        if (!namespace.isEmpty()) {
            producer.setNamespace(namespace);
        }
        producer.setInstanceName("rmq_rust_test_" + ProcessHandle.current().pid());
        producer.setVipChannelEnabled(false);
        producer.setCompressMsgBodyOverHowmuch(COMPRESS_OVER);
        producer.setCompressType(compressionType);
        producer.setSendMsgTimeout(15000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        List<String> lines = new ArrayList<>();
        List<Sent> sent = new ArrayList<>();
        try {
            MessageQueueSelector queue0 = (mqs, msg, arg) -> {
                for (MessageQueue mq : mqs) {
                    if (mq.getQueueId() == 0) {
                        return mq;
                    }
                }
                throw new IllegalStateException("topic has no queue 0: " + mqs);
            };
            String brokerName = null;
            int index = 0;
            for (Planned p : singles) {
                SendResult r = producer.send(p.msg, queue0, null);
                check(r, 1);
                brokerName = r.getMessageQueue().getBrokerName();
                boolean compressed = p.body.length >= COMPRESS_OVER;
                sent.add(new Sent(index++, p, r.getMessageQueue(), r.getQueueOffset(), r.getMsgId(), r.getOffsetMsgId(),
                    false, compressed, compressed ? ctName : "NONE", r.getSendStatus()));
            }
            List<Message> msgs = new ArrayList<>();
            for (Planned p : batch) {
                msgs.add(p.msg);
            }
            // With a namespace, 5.3.3's send(Collection, MessageQueue) wraps the messages' topic but
            // not the queue's: give it the wrapped name (wrapping twice is a no-op).
            String batchTopic = namespace.isEmpty() ? topic : NamespaceUtil.wrapNamespace(namespace, topic);
            MessageQueue mq0 = new MessageQueue(batchTopic, brokerName, 0);
            SendResult r = producer.send(msgs, mq0);
            check(r, batch.size());
            String[] ids = r.getMsgId().split(",");
            String[] offIds = r.getOffsetMsgId().split(",");
            if (ids.length != batch.size() || offIds.length != batch.size()) {
                throw new IllegalStateException("batch SendResult has " + ids.length + " msgIds / " + offIds.length
                    + " offsetMsgIds for " + batch.size() + " messages: " + r);
            }
            for (int i = 0; i < batch.size(); i++) {
                Planned p = batch.get(i);
                String uniq = p.msg.getProperty("UNIQ_KEY");
                if (uniq != null && !uniq.equals(ids[i])) {
                    throw new IllegalStateException("batch msgId order mismatch: " + uniq + " vs " + ids[i]);
                }
                sent.add(new Sent(index++, p, r.getMessageQueue(), r.getQueueOffset() + i, ids[i], offIds[i],
                    true, false, "NONE", r.getSendStatus()));
            }
            // Read every message back from the broker (VIEW_MESSAGE_BY_ID, decoded by the Java client the
            // way a Java consumer decodes a pull) so the manifest also says what a consumer sees.
            for (Sent s : sent) {
                MessageExt ext = producer.viewMessage(topic, s.offsetMsgId);
                if (ext == null) {
                    throw new IllegalStateException("viewMessage returned nothing for " + s.offsetMsgId);
                }
                if (!Arrays.equals(ext.getBody(), s.p.body) || ext.getQueueOffset() != s.queueOffset
                    || ext.getQueueId() != s.mq.getQueueId() || !topic.equals(ext.getTopic())) {
                    throw new IllegalStateException("broker copy of message " + s.index + " differs: " + ext);
                }
                int typeBits = ext.getSysFlag() & 0x700;
                if (s.compressed ? typeBits == 0 : ext.getSysFlag() != 0) {
                    throw new IllegalStateException("unexpected sysFlag " + ext.getSysFlag() + " for message " + s.index
                        + " (compressed=" + s.compressed + ")");
                }
                lines.add(json(s, ext, ctName));
            }
        } finally {
            producer.shutdown();
        }

        Path parent = manifest.toAbsolutePath().getParent();
        if (parent != null) {
            Files.createDirectories(parent);
        }
        if (Files.exists(manifest) && !Files.isRegularFile(manifest)) {
            // a device or pipe (e.g. /dev/stdout): write straight to it, never replace it
            try (Writer w = Files.newBufferedWriter(manifest, StandardCharsets.UTF_8)) {
                writeLines(w, lines);
            }
        } else {
            // regular file: write a sibling temp file, then rename, so readers never see half a manifest
            Path tmp = manifest.resolveSibling(manifest.getFileName() + ".tmp");
            try (Writer w = Files.newBufferedWriter(tmp, StandardCharsets.UTF_8)) {
                writeLines(w, lines);
            }
            Files.move(tmp, manifest, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        }
        System.out.println("Produce: sent " + lines.size() + " messages to " + topic + " queue 0 (compressType "
            + ctName + "), manifest " + manifest);
        return 0;
    }

    static void writeLines(Writer w, List<String> lines) throws IOException {
        for (String l : lines) {
            w.write(l);
            w.write('\n');
        }
    }

    static void check(SendResult r, int n) {
        if (r == null || r.getSendStatus() != SendStatus.SEND_OK) {
            throw new IllegalStateException("send of " + n + " message(s) failed: " + r);
        }
        if (r.getMessageQueue() == null || r.getMessageQueue().getQueueId() != 0) {
            throw new IllegalStateException("message(s) did not land on queue 0: " + r);
        }
    }

    /** Deterministic ASCII: "line-0000: the quick brown fox jumps over the lazy dog\n" repeated, cut to n. */
    static byte[] bigText(int n) {
        StringBuilder sb = new StringBuilder(n + 64);
        for (int i = 0; sb.length() < n; i++) {
            sb.append(String.format(Locale.ROOT, "line-%04d: the quick brown fox jumps over the lazy dog\n", i));
        }
        sb.setLength(n);
        return sb.toString().getBytes(StandardCharsets.US_ASCII);
    }

    static String json(Sent s, MessageExt ext, String producerCompressType) {
        Planned p = s.p;
        StringBuilder sb = new StringBuilder(1024 + p.body.length * 4 / 3);
        sb.append('{');
        field(sb, "index").append(s.index).append(',');
        field(sb, "kind"); str(sb, p.kind).append(',');
        field(sb, "topic"); str(sb, s.mq.getTopic()).append(',');
        field(sb, "brokerName"); str(sb, s.mq.getBrokerName()).append(',');
        field(sb, "queueId").append(s.mq.getQueueId()).append(',');
        field(sb, "queueOffset").append(s.queueOffset).append(',');
        field(sb, "msgId"); str(sb, s.msgId).append(',');
        field(sb, "consumerMsgId"); str(sb, ext.getMsgId()).append(',');
        field(sb, "offsetMsgId"); str(sb, s.offsetMsgId).append(',');
        field(sb, "tags"); str(sb, p.msg.getTags()).append(',');
        field(sb, "keys"); str(sb, p.keys == null ? null : String.join(" ", p.keys)).append(',');
        field(sb, "bodyBase64"); str(sb, Base64.getEncoder().encodeToString(p.body)).append(',');
        field(sb, "bodyLen").append(p.body.length).append(',');
        field(sb, "userProperties"); map(sb, p.userProps).append(',');
        field(sb, "flag").append(p.msg.getFlag()).append(',');
        field(sb, "waitStoreMsgOK").append(p.msg.isWaitStoreMsgOK()).append(',');
        field(sb, "batch").append(s.batch).append(',');
        field(sb, "compressed").append(s.compressed).append(',');
        field(sb, "compressType"); str(sb, s.compressType).append(',');
        field(sb, "producerCompressType"); str(sb, producerCompressType).append(',');
        // sysFlag as stored and as sent in a pull response: the Java decoder clears bit 0x1 after
        // decompressing but keeps the compression-type bits, so put it back
        field(sb, "storedSysFlag").append(ext.getSysFlag() | (s.compressed ? 1 : 0)).append(',');
        field(sb, "sendStatus"); str(sb, s.status.name()).append(',');
        field(sb, "javaView").append('{');
        field(sb, "msgId"); str(sb, ext.getMsgId()).append(',');
        field(sb, "offsetMsgId");
        str(sb, ext instanceof MessageClientExt ? ((MessageClientExt) ext).getOffsetMsgId() : ext.getMsgId()).append(',');
        field(sb, "queueId").append(ext.getQueueId()).append(',');
        field(sb, "queueOffset").append(ext.getQueueOffset()).append(',');
        field(sb, "commitLogOffset").append(ext.getCommitLogOffset()).append(',');
        field(sb, "storeSize").append(ext.getStoreSize()).append(',');
        field(sb, "sysFlag").append(ext.getSysFlag()).append(',');
        field(sb, "bodyCRC").append(ext.getBodyCRC()).append(',');
        field(sb, "flag").append(ext.getFlag()).append(',');
        field(sb, "reconsumeTimes").append(ext.getReconsumeTimes()).append(',');
        field(sb, "bornTimestamp").append(ext.getBornTimestamp()).append(',');
        field(sb, "storeTimestamp").append(ext.getStoreTimestamp()).append(',');
        field(sb, "bornHost"); str(sb, host(ext.getBornHost())).append(',');
        field(sb, "storeHost"); str(sb, host(ext.getStoreHost())).append(',');
        field(sb, "properties"); map(sb, new TreeMap<>(ext.getProperties()));
        sb.append('}');
        sb.append('}');
        return sb.toString();
    }

    static String host(SocketAddress a) {
        if (a instanceof InetSocketAddress) {
            InetSocketAddress i = (InetSocketAddress) a;
            return i.getAddress().getHostAddress() + ":" + i.getPort();
        }
        return String.valueOf(a);
    }

    static StringBuilder map(StringBuilder sb, Map<String, String> m) {
        sb.append('{');
        boolean first = true;
        for (Map.Entry<String, String> e : m.entrySet()) {
            if (!first) {
                sb.append(',');
            }
            first = false;
            str(sb, e.getKey()).append(':');
            str(sb, e.getValue());
        }
        return sb.append('}');
    }

    static StringBuilder field(StringBuilder sb, String name) {
        return str(sb, name).append(':');
    }

    /** JSON string (UTF-8 text as is; only quote, backslash and control characters escaped), or null. */
    static StringBuilder str(StringBuilder sb, String s) {
        if (s == null) {
            return sb.append("null");
        }
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        return sb.append('"');
    }

    private Produce() {
    }
}
