package rmqtest;

import java.io.FileOutputStream;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RequestCode;
import org.apache.rocketmq.remoting.protocol.header.PullMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.QueryConsumerOffsetRequestHeader;

/**
 * Requests signed by the REAL Java client's AclClientRPCHook (rocketmq-client 5.3.3), for
 * tests/acl_signature.rs: each line is what Java sent — the secret, the body and every ext field
 * after the hook ran (AccessKey, SecurityToken, Signature included) — all hex-encoded UTF-8 so no
 * escaping is needed:
 *
 * <pre>
 * secretHex bodyHex name1Hex=value1Hex,name2Hex=value2Hex,...
 * </pre>
 *
 * usage: AclGolden OUT_PATH
 */
public final class AclGolden {
    private AclGolden() {}

    public static void main(String[] args) throws Exception {
        try (PrintWriter out = new PrintWriter(new OutputStreamWriter(new FileOutputStream(args[0]), StandardCharsets.UTF_8))) {
            // A pull as the push consumer sends it.
            PullMessageRequestHeader pull = new PullMessageRequestHeader();
            pull.setConsumerGroup("acl_group");
            pull.setTopic("acl_topic");
            pull.setQueueId(3);
            pull.setQueueOffset(12345L);
            pull.setMaxMsgNums(32);
            pull.setSysFlag(3);
            pull.setCommitOffset(12000L);
            pull.setSuspendTimeoutMillis(15000L);
            pull.setSubscription("*");
            pull.setSubVersion(1700000000000L);
            pull.setExpressionType("TAG");
            pull.setBrokerName("broker-a");
            emit(out, RemotingCommand.createRequestCommand(RequestCode.PULL_MESSAGE, pull), new SessionCredentials("RocketMQ", "12345678"));

            QueryConsumerOffsetRequestHeader query = new QueryConsumerOffsetRequestHeader();
            query.setConsumerGroup("组-acl");
            query.setTopic("acl_topic");
            query.setQueueId(0);
            SessionCredentials withToken = new SessionCredentials("ak-token", "sk-秘密");
            withToken.setSecurityToken("token-1");
            emit(out, RemotingCommand.createRequestCommand(RequestCode.QUERY_CONSUMER_OFFSET, query), withToken);

            // A body (a heartbeat-like JSON) and no header.
            RemotingCommand heartbeat = RemotingCommand.createRequestCommand(RequestCode.HEART_BEAT, null);
            heartbeat.setBody("{\"clientID\":\"127.0.0.1@1\",\"consumerDataSet\":[]}".getBytes(StandardCharsets.UTF_8));
            emit(out, heartbeat, new SessionCredentials("RocketMQ", "12345678"));

            // Field names whose order differs from insertion order, and an empty value.
            RemotingCommand custom = RemotingCommand.createRequestCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, null);
            custom.addExtField("topic", "T");
            custom.addExtField("acceptStandardJsonOnly", "true");
            custom.addExtField("Zed", "");
            custom.addExtField("alpha", "ü");
            emit(out, custom, new SessionCredentials("a", "b"));
        }
    }

    private static void emit(PrintWriter out, RemotingCommand cmd, SessionCredentials c) {
        new AclClientRPCHook(c).doBeforeRequest("127.0.0.1:10911", cmd);
        StringBuilder line = new StringBuilder();
        line.append(hex(c.getSecretKey().getBytes(StandardCharsets.UTF_8))).append(' ');
        byte[] body = cmd.getBody();
        line.append(body == null || body.length == 0 ? "-" : hex(body)).append(' ');
        boolean first = true;
        for (Map.Entry<String, String> e : new TreeMap<>(cmd.getExtFields()).entrySet()) {
            if (!first) {
                line.append(',');
            }
            first = false;
            line.append(hex(e.getKey().getBytes(StandardCharsets.UTF_8))).append('=')
                .append(e.getValue().isEmpty() ? "-" : hex(e.getValue().getBytes(StandardCharsets.UTF_8)));
        }
        out.println(line);
    }

    private static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) {
            s.append(String.format("%02x", x & 0xff));
        }
        return s.toString();
    }
}
