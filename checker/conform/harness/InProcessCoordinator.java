// Kafka's group coordinator run in-process: one GroupCoordinatorShard (module
// kafka-group-coordinator) held as the coordinator runtime holds it, with a SnapshotRegistry, a
// clock that does not move, a timer that fires only when asked ('F'), an executor that never runs, the scripted
// assignor (ScriptedAssignor.SCRIPT) and a metadata image of the topics the driver creates. The
// release-specific construction (the shard's builder, the timer's generic type, the metadata
// update) is in Compat, one small source per release (Compat_4_2.java, Compat_4_3.java,
// Compat_4_4.java); the driver compiles this file with the one of its release.
//
// A request is applied as CoordinatorRuntime applies a write: the shard's handler returns a
// response and records, and the records are replayed into the shard (replay(offset, producer id,
// producer epoch, record)), one offset each; the result's append future is then completed, as
// the runtime does once the records are committed (the classic protocol answers a leader's
// SyncGroup, and a join phase that empties the group, from it). An exception from the handler becomes the error
// response through Kafka's own CoordinatorOperationExceptionHelper.handleOperationException, as
// GroupCoordinatorService does. Reads (ConsumerGroupDescribe, offsets) read the latest state.
//
// The pipe protocol (stdin, stdout; every integer big-endian): a frame is an int32 length and
// that many bytes; the first byte of a request frame names the operation:
//   'R' api key (int16), api version (int16), request body  -> status byte 0 and the response
//       body at that version, or status 1 and a UTF-8 reason
//   'T' topic name, partitions (int32)                      -> topic id (two int64)
//   'A' count (int32), then member id, script text each     -> nothing (merged into the script)
//   'S' snapshot id (int64, above every earlier one)        -> nothing (a snapshot taken)
//   'V' snapshot id (int64)                                 -> nothing (reverted; later ones dropped)
//   'D' snapshot id (int64)                                 -> nothing (the snapshot deleted)
//   'M' group id                                            -> JSON: member id -> the latest
//       ConsumerGroupCurrentMemberAssignmentValue (the form RecordDecoder writes)
//   'O' group id                                            -> the group's committed offsets, text
//   'P' parked id (int32)                                   -> 1 and the response body when the
//       parked request has been answered, else 0
//   'F' timer key                                           -> 1 if that timer was scheduled and
//       has fired (its records replayed), else 0
// A classic JoinGroup or SyncGroup the shard answers later (its future not completed by the
// handler: the join phase is still open, a follower waits for the leader's assignment) is
// answered 'R' -> status 3 and a parked id (int32); 'P' reads its answer once another request or
// a fired timer has completed it.
// Timers never fire by themselves (the clock stands still); 'F' fires one as a spec step says
// (the classic group's initial rebalance delay ends a new group's first join phase).
// Member ids (ClassicGroup.generateMemberId: Uuid.randomUuid) come from java.util.UUID's
// SecureRandom, which is Seeded here: a counter saved with every snapshot, so a revert followed
// by the same requests hands out the same ids (a rebuilt group equals the one it replaces).
// Strings are an int32 length and UTF-8 bytes. Replies are written without a flush while more
// requests are waiting on stdin, so a batch of frames costs one round trip.
package kcheck;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.security.Provider;
import java.security.Security;
import java.security.SecureRandomSpi;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.AddOffsetsToTxnResponseData;
import org.apache.kafka.common.message.ConsumerGroupDescribeRequestData;
import org.apache.kafka.common.message.ConsumerGroupDescribeResponseData;
import org.apache.kafka.common.message.ConsumerGroupHeartbeatRequestData;
import org.apache.kafka.common.message.ConsumerGroupHeartbeatResponseData;
import org.apache.kafka.common.message.EndTxnRequestData;
import org.apache.kafka.common.message.EndTxnResponseData;
import org.apache.kafka.common.message.DescribeGroupsRequestData;
import org.apache.kafka.common.message.DescribeGroupsResponseData;
import org.apache.kafka.common.message.HeartbeatRequestData;
import org.apache.kafka.common.message.HeartbeatResponseData;
import org.apache.kafka.common.message.JoinGroupRequestData;
import org.apache.kafka.common.message.JoinGroupResponseData;
import org.apache.kafka.common.message.LeaveGroupRequestData;
import org.apache.kafka.common.message.LeaveGroupResponseData;
import org.apache.kafka.common.message.SyncGroupRequestData;
import org.apache.kafka.common.message.SyncGroupResponseData;
import org.apache.kafka.common.message.InitProducerIdResponseData;
import org.apache.kafka.common.message.OffsetCommitRequestData;
import org.apache.kafka.common.message.OffsetCommitResponseData;
import org.apache.kafka.common.message.OffsetFetchRequestData;
import org.apache.kafka.common.message.OffsetFetchResponseData;
import org.apache.kafka.common.message.TxnOffsetCommitRequestData;
import org.apache.kafka.common.message.TxnOffsetCommitResponseData;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.requests.OffsetCommitRequest;
import org.apache.kafka.common.requests.TransactionResult;
import org.apache.kafka.common.requests.TxnOffsetCommitRequest;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.auth.SecurityProtocol;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.coordinator.common.runtime.CoordinatorOperationExceptionHelper;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.common.runtime.CoordinatorResult;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupCurrentMemberAssignmentKey;
import org.apache.kafka.coordinator.group.generated.CoordinatorRecordJsonConverters;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.timeline.TimelineHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

public final class InProcessCoordinator {
    static final long NO_PRODUCER_ID = -1L;
    static final short NO_PRODUCER_EPOCH = -1;
    private static final Logger LOG = LoggerFactory.getLogger("kcheck.InProcessCoordinator");

    /** A clock that stands still: no session, rebalance or regex timer is ever due. */
    static final class FixedTime implements Time {
        private final long ms = 1_700_000_000_000L;
        public long milliseconds() { return ms; }
        public long nanoseconds() { return ms * 1_000_000L; }
        public void sleep(long ms) { }
        public void waitObject(Object o, java.util.function.Supplier<Boolean> c, long deadline) { }
    }

    /** java.util.UUID's SecureRandom, made a function of a counter the harness saves with each
     *  snapshot (SplitMix64 of the counter): the ids Kafka draws are the same on a replay. */
    public static final class Seeded extends SecureRandomSpi {
        static long counter;
        public Seeded() { }
        protected void engineSetSeed(byte[] seed) { }
        protected void engineNextBytes(byte[] bytes) {
            for (int i = 0; i < bytes.length; i += 8) {
                long z = (++counter) * 0x9E3779B97F4A7C15L;
                z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
                z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
                z = z ^ (z >>> 31);
                for (int j = 0; j < 8 && i + j < bytes.length; j++) bytes[i + j] = (byte) (z >>> (8 * j));
            }
        }
        protected byte[] engineGenerateSeed(int n) {
            byte[] out = new byte[n];
            engineNextBytes(out);
            return out;
        }

        /** The first provider of SecureRandom, before anything asks for one. */
        static void install() {
            Provider p = new Provider("KcheckSeeded", "1.0", "kcheck: a counter as randomness") { };
            p.put("SecureRandom.KcheckSeeded", Seeded.class.getName());
            Security.insertProviderAt(p, 1);
        }
    }

    /** A classic JoinGroup or SyncGroup that the shard answers later, and its API version. */
    static final class Parked {
        final CompletableFuture<? extends ApiMessage> future;
        final short version;
        Parked(CompletableFuture<? extends ApiMessage> future, short version) {
            this.future = future;
            this.version = version;
        }
    }

    /** What a request's context tells the coordinator: the API and its version. */
    static final class Context implements AuthorizableRequestContext {
        final int api;
        final int version;
        Context(int api, int version) { this.api = api; this.version = version; }
        public String listenerName() { return "PLAINTEXT"; }
        public SecurityProtocol securityProtocol() { return SecurityProtocol.PLAINTEXT; }
        public KafkaPrincipal principal() { return KafkaPrincipal.ANONYMOUS; }
        public InetAddress clientAddress() { return InetAddress.getLoopbackAddress(); }
        public int requestType() { return api; }
        public int requestVersion() { return version; }
        public String clientId() { return "kcheck"; }
        public int correlationId() { return 0; }
    }

    private final Compat compat;
    private final Map<String, String> script = new HashMap<>();
    // the latest ConsumerGroupCurrentMemberAssignment record per (group, member), as JSON: a
    // timeline map, so that a revert undoes it with the shard
    private final TimelineHashMap<String, String> memberRecords;
    // what is not in timeline structures, saved per snapshot and put back by a revert
    private final TreeMap<Long, Object[]> saved = new TreeMap<>();
    // the classic requests answered later, by parked id; the next id
    private final HashMap<Integer, Parked> parked = new HashMap<>();
    private int nextParked = 1;
    private int lastParked;             // the id 'R' answers with when the request was parked
    private long offset = 1;            // the next record's offset
    // where topic ids are drawn from (Seeded's counter), far from the member ids' stream; the
    // topics made so far (Compat's topics, like this count, outlive a revert)
    private static final long TOPIC_IDS = 1L << 62;
    private long topicsMade;
    private long nextProducerId = 1000;
    private final ObjectMapper json = new ObjectMapper();

    InProcessCoordinator(Map<String, Object> props) {
        ScriptedAssignor.SCRIPT = script;
        compat = new Compat(props, new FixedTime());
        memberRecords = new TimelineHashMap<>(compat.registry, 0);
    }

    // -- requests ---------------------------------------------------------------------------
    private void apply(CoordinatorResult<?, CoordinatorRecord> result, long producerId, short producerEpoch) {
        for (CoordinatorRecord record : result.records()) {
            if (result.replayRecords()) {
                compat.shard.replay(offset, producerId, producerEpoch, record);
            }
            offset++;
            ApiMessage key = record.key();
            if (key instanceof ConsumerGroupCurrentMemberAssignmentKey) {
                ConsumerGroupCurrentMemberAssignmentKey k = (ConsumerGroupCurrentMemberAssignmentKey) key;
                String id = k.groupId() + "\u0000" + k.memberId();
                if (record.value() == null) {
                    memberRecords.remove(id);
                } else {
                    memberRecords.put(id, CoordinatorRecordJsonConverters.writeRecordValueAsJson(
                        record.value().message(), record.value().version()).toString());
                }
            }
        }
        // committed at once: CoordinatorRuntime completes the append future when the records
        // reach the high watermark
        if (result.appendFuture() != null) result.appendFuture().complete(null);
    }

    /** A classic request whose answer is a future: its answer now, or the parked marker (null,
     *  with lastParked set). An exception from the handler completes the future with the error,
     *  as GroupCoordinatorService.joinGroup / syncGroup do. */
    private <T extends ApiMessage> ApiMessage answerOrPark(CompletableFuture<T> future, short version) {
        if (future.isDone()) return future.join();
        lastParked = nextParked++;
        parked.put(lastParked, new Parked(future, version));
        return null;
    }

    /** Fires the timer KEY if it is scheduled: its operation's records are replayed. */
    boolean fire(String key) {
        CoordinatorResult<?, CoordinatorRecord> r = compat.fire(key);
        if (r == null) return false;
        apply(r, NO_PRODUCER_ID, NO_PRODUCER_EPOCH);
        return true;
    }

    /** The response to a request, or null when it is parked (lastParked) or not served. */
    ApiMessage handle(short api, short version, ByteBuffer body) {
        Context ctx = new Context(api, version);
        ByteBufferAccessor in = new ByteBufferAccessor(body);
        switch (api) {
            case 68: {   // ConsumerGroupHeartbeat
                ConsumerGroupHeartbeatRequestData req = new ConsumerGroupHeartbeatRequestData(in, version);
                try {
                    CoordinatorResult<ConsumerGroupHeartbeatResponseData, CoordinatorRecord> r =
                        compat.shard.consumerGroupHeartbeat(ctx, req);
                    apply(r, NO_PRODUCER_ID, NO_PRODUCER_EPOCH);
                    return r.response();
                } catch (Throwable t) {
                    return CoordinatorOperationExceptionHelper.handleOperationException(
                        "consumer-group-heartbeat", req, t,
                        (error, message) -> new ConsumerGroupHeartbeatResponseData()
                            .setErrorCode(error.code()).setErrorMessage(message), LOG);
                }
            }
            case 69: {   // ConsumerGroupDescribe
                ConsumerGroupDescribeRequestData req = new ConsumerGroupDescribeRequestData(in, version);
                return new ConsumerGroupDescribeResponseData().setGroups(
                    compat.shard.consumerGroupDescribe(req.groupIds(), Long.MAX_VALUE));
            }
            case 8: {    // OffsetCommit
                OffsetCommitRequestData req = new OffsetCommitRequestData(in, version);
                // KafkaApis.handleOffsetCommitRequest: a topic named (v9 and older) gets its id
                // from the metadata cache before the coordinator sees the request
                for (OffsetCommitRequestData.OffsetCommitRequestTopic t : req.topics()) {
                    if (Uuid.ZERO_UUID.equals(t.topicId())) t.setTopicId(compat.topicId(t.name()));
                }
                try {
                    CoordinatorResult<OffsetCommitResponseData, CoordinatorRecord> r =
                        compat.shard.commitOffset(ctx, req);
                    apply(r, NO_PRODUCER_ID, NO_PRODUCER_EPOCH);
                    return r.response();
                } catch (Throwable t) {
                    return CoordinatorOperationExceptionHelper.handleOperationException(
                        "commit-offset", req, t,
                        (error, message) -> OffsetCommitRequest.getErrorResponse(req, error), LOG);
                }
            }
            case 28: {   // TxnOffsetCommit: the records are replayed as the transaction's
                TxnOffsetCommitRequestData req = new TxnOffsetCommitRequestData(in, version);
                compat.resolveTopicIds(req);   // as KafkaApis does, where it does (4.4)
                try {
                    CoordinatorResult<TxnOffsetCommitResponseData, CoordinatorRecord> r =
                        compat.shard.commitTransactionalOffset(ctx, req);
                    apply(r, req.producerId(), req.producerEpoch());
                    return r.response();
                } catch (Throwable t) {
                    return CoordinatorOperationExceptionHelper.handleOperationException(
                        "txn-commit-offset", req, t,
                        (error, message) -> TxnOffsetCommitRequest.getErrorResponse(req, error), LOG);
                }
            }
            // The classic protocol (GroupCoordinatorService.joinGroup, syncGroup, heartbeat,
            // leaveGroup, describeGroups): JoinGroup and SyncGroup complete a future, maybe later
            case 11: {   // JoinGroup
                JoinGroupRequestData req = new JoinGroupRequestData(in, version);
                CompletableFuture<JoinGroupResponseData> future = new CompletableFuture<>();
                try {
                    apply(compat.classicGroupJoin(ctx, req, future), NO_PRODUCER_ID, NO_PRODUCER_EPOCH);
                } catch (Throwable t) {
                    if (!future.isDone()) future.complete(CoordinatorOperationExceptionHelper.handleOperationException(
                        "classic-group-join", req, t,
                        (error, message) -> new JoinGroupResponseData().setMemberId(req.memberId())
                            .setErrorCode(error.code()), LOG));
                }
                return answerOrPark(future, version);
            }
            case 14: {   // SyncGroup
                SyncGroupRequestData req = new SyncGroupRequestData(in, version);
                CompletableFuture<SyncGroupResponseData> future = new CompletableFuture<>();
                try {
                    apply(compat.shard.classicGroupSync(ctx, req, future), NO_PRODUCER_ID, NO_PRODUCER_EPOCH);
                } catch (Throwable t) {
                    if (!future.isDone()) future.complete(CoordinatorOperationExceptionHelper.handleOperationException(
                        "classic-group-sync", req, t,
                        (error, message) -> new SyncGroupResponseData().setErrorCode(error.code()), LOG));
                }
                return answerOrPark(future, version);
            }
            case 12: {   // Heartbeat
                HeartbeatRequestData req = new HeartbeatRequestData(in, version);
                try {
                    CoordinatorResult<HeartbeatResponseData, CoordinatorRecord> r =
                        compat.shard.classicGroupHeartbeat(ctx, req);
                    apply(r, NO_PRODUCER_ID, NO_PRODUCER_EPOCH);
                    return r.response();
                } catch (Throwable t) {
                    return CoordinatorOperationExceptionHelper.handleOperationException(
                        "classic-group-heartbeat", req, t,
                        (error, message) -> new HeartbeatResponseData().setErrorCode(error.code()), LOG);
                }
            }
            case 13: {   // LeaveGroup
                LeaveGroupRequestData req = new LeaveGroupRequestData(in, version);
                try {
                    CoordinatorResult<LeaveGroupResponseData, CoordinatorRecord> r =
                        compat.shard.classicGroupLeave(ctx, req);
                    apply(r, NO_PRODUCER_ID, NO_PRODUCER_EPOCH);
                    return r.response();
                } catch (Throwable t) {
                    return CoordinatorOperationExceptionHelper.handleOperationException(
                        "classic-group-leave", req, t,
                        (error, message) -> new LeaveGroupResponseData().setErrorCode(error.code()), LOG);
                }
            }
            case 15: {   // DescribeGroups
                DescribeGroupsRequestData req = new DescribeGroupsRequestData(in, version);
                return new DescribeGroupsResponseData().setGroups(
                    compat.shard.describeGroups(ctx, req.groups(), Long.MAX_VALUE));
            }
            // The transaction coordinator is not run in-process: InitProducerId hands out a new
            // producer id at epoch 0, AddOffsetsToTxn accepts, and EndTxn writes what the
            // transaction coordinator's marker does to the group coordinator
            // (replayEndTransactionMarker). Only the group coordinator's decisions are checked.
            case 22:
                return new InitProducerIdResponseData().setProducerId(nextProducerId++).setProducerEpoch((short) 0);
            case 25:
                return new AddOffsetsToTxnResponseData();
            case 26: {
                EndTxnRequestData req = new EndTxnRequestData(in, version);
                compat.shard.replayEndTransactionMarker(req.producerId(), req.producerEpoch(),
                    req.committed() ? TransactionResult.COMMIT : TransactionResult.ABORT);
                return new EndTxnResponseData();
            }
            default:
                return null;
        }
    }

    // -- snapshots ----------------------------------------------------------------------------
    void snapshot(long id) {
        compat.registry.idempotentCreateSnapshot(id);
        saved.put(id, new Object[] {new HashMap<>(compat.timers), new HashMap<>(script),
                                    new HashMap<>(compat.tasks), new HashMap<>(parked),
                                    new long[] {nextParked, Seeded.counter}});
    }

    @SuppressWarnings("unchecked")
    void revert(long id) {
        Object[] s = saved.get(id);
        if (s == null) throw new IllegalStateException("no snapshot " + id);
        compat.registry.revertToSnapshot(id);
        if (saved.headMap(id).isEmpty()) {
            // SnapshotRegistry.revertToSnapshot leaves the target's deltas in place (Snapshot.
            // handleRevert does not clear them), so a snapshot reverted to again and again (the
            // root's, under every rebuild) would revert every structure ever changed since it,
            // at a cost growing with the walk: the oldest is taken afresh (deleted, then created
            // at the same epoch: the state is the one just restored). A later snapshot is kept,
            // its deltas would be merged into the one before it.
            compat.registry.deleteSnapshot(id);
            compat.registry.idempotentCreateSnapshot(id);
        }
        compat.timers.clear();
        compat.timers.putAll((Map<String, Object>) s[0]);
        script.clear();
        script.putAll((Map<String, String>) s[1]);
        compat.tasks.clear();
        compat.tasks.putAll((Map<String, Object>) s[2]);
        parked.clear();
        parked.putAll((Map<Integer, Parked>) s[3]);
        nextParked = (int) ((long[]) s[4])[0];
        Seeded.counter = ((long[]) s[4])[1];
        saved.tailMap(id, false).clear();
    }

    // -- what the state shows -------------------------------------------------------------------
    String memberRecordsOf(String group) throws IOException {
        ObjectNode out = json.createObjectNode();
        String prefix = group + "\u0000";
        TreeMap<String, String> sorted = new TreeMap<>();
        for (Map.Entry<String, String> e : memberRecords.entrySet()) {
            if (e.getKey().startsWith(prefix)) sorted.put(e.getKey().substring(prefix.length()), e.getValue());
        }
        for (Map.Entry<String, String> e : sorted.entrySet()) out.set(e.getKey(), json.readTree(e.getValue()));
        return json.writeValueAsString(out);
    }

    String offsetsOf(String group) {
        try {
            OffsetFetchResponseData.OffsetFetchResponseGroup g = compat.fetchAllOffsets(
                new OffsetFetchRequestData.OffsetFetchRequestGroup().setGroupId(group).setTopics(null));
            TreeSet<String> lines = new TreeSet<>();
            for (OffsetFetchResponseData.OffsetFetchResponseTopics t : g.topics()) {
                for (OffsetFetchResponseData.OffsetFetchResponsePartitions p : t.partitions()) {
                    lines.add(t.name() + "-" + p.partitionIndex() + "=" + p.committedOffset()
                              + "@" + p.committedLeaderEpoch() + (p.errorCode() != 0 ? " error " + p.errorCode() : ""));
                }
            }
            return "error " + g.errorCode() + " " + String.join(" ", lines);
        } catch (RuntimeException e) {
            return "error " + e;
        }
    }

    // -- the pipe -------------------------------------------------------------------------------
    private static String str(ByteBuffer b) {
        int n = b.getInt();
        String s = new String(b.array(), b.arrayOffset() + b.position(), n, StandardCharsets.UTF_8);
        b.position(b.position() + n);
        return s;
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    byte[] serve(ByteBuffer frame) throws IOException {
        byte op = frame.get();
        switch (op) {
            case 'R': {
                short api = frame.getShort();
                short version = frame.getShort();
                lastParked = 0;
                ApiMessage response = handle(api, version, frame.slice());
                if (response == null && lastParked != 0) {
                    return ByteBuffer.allocate(5).put((byte) 3).putInt(lastParked).array();
                }
                if (response == null) return status(1, utf8("API key " + api + " is not served in-process"));
                ByteBuffer body = MessageUtil.toByteBufferAccessor(response, version).buffer();
                byte[] out = new byte[1 + body.remaining()];
                body.get(out, 1, body.remaining());
                return out;
            }
            case 'T': {
                String name = str(frame);
                int partitions = frame.getInt();
                // a topic's id comes from a stream of its own, not the member ids': a replayed
                // 'T' finds the topic made already and draws nothing, so the ids drawn after it
                // must not depend on it
                long counter = Seeded.counter;
                Seeded.counter = TOPIC_IDS + 64L * topicsMade++;
                Uuid id = compat.createTopic(name, partitions);
                Seeded.counter = counter;
                return ByteBuffer.allocate(16).putLong(id.getMostSignificantBits())
                    .putLong(id.getLeastSignificantBits()).array();
            }
            case 'A': {
                int n = frame.getInt();
                for (int i = 0; i < n; i++) {
                    String member = str(frame);
                    script.put(member, str(frame));
                }
                return new byte[0];
            }
            case 'S':
                snapshot(frame.getLong());
                return new byte[0];
            case 'V':
                revert(frame.getLong());
                return new byte[0];
            case 'D': {
                long id = frame.getLong();
                compat.registry.deleteSnapshot(id);
                saved.remove(id);
                return new byte[0];
            }
            case 'M':
                return utf8(memberRecordsOf(str(frame)));
            case 'P': {
                Parked p = parked.get(frame.getInt());
                if (p == null) throw new IllegalArgumentException("no parked request with that id");
                if (!p.future.isDone()) return new byte[] {0};
                ByteBuffer body = MessageUtil.toByteBufferAccessor(p.future.join(), p.version).buffer();
                byte[] out = new byte[1 + body.remaining()];
                out[0] = 1;
                body.get(out, 1, body.remaining());
                return out;
            }
            case 'F':
                return new byte[] {(byte) (fire(str(frame)) ? 1 : 0)};
            case 'O':
                return utf8(offsetsOf(str(frame)));
            default:
                throw new IllegalArgumentException("unknown operation " + (char) op);
        }
    }

    private static byte[] status(int code, byte[] rest) {
        byte[] out = new byte[1 + rest.length];
        out[0] = (byte) code;
        System.arraycopy(rest, 0, out, 1, rest.length);
        return out;
    }

    public static void main(String[] args) throws Exception {
        Seeded.install();
        // the configuration: KEY=VALUE arguments, as the broker harness's settings
        Map<String, Object> props = new HashMap<>();
        for (String a : args) {
            int eq = a.indexOf('=');
            props.put(a.substring(0, eq), a.substring(eq + 1));
        }
        // stdout is the pipe: anything Kafka's code logs to the console goes to stderr
        DataOutputStream out = new DataOutputStream(new BufferedOutputStream(
            new FileOutputStream(FileDescriptor.out), 1 << 16));
        System.setOut(System.err);
        DataInputStream in = new DataInputStream(new BufferedInputStream(System.in, 1 << 16));
        InProcessCoordinator c;
        try {
            c = new InProcessCoordinator(props);
        } catch (Throwable t) {
            byte[] reason = utf8("cannot build the group coordinator shard: " + t);
            out.writeInt(reason.length + 1);
            out.writeByte(1);
            out.write(reason);
            out.flush();
            System.exit(3);
            return;
        }
        out.writeInt(1);
        out.writeByte(0);   // ready
        out.flush();
        while (true) {
            int n;
            try {
                n = in.readInt();
            } catch (EOFException e) {
                break;
            }
            byte[] frame = new byte[n];
            in.readFully(frame);
            byte[] reply;
            byte code = 0;
            try {
                reply = c.serve(ByteBuffer.wrap(frame));
            } catch (Throwable t) {
                code = 2;
                reply = utf8(t.toString());
            }
            // a frame back: status (0 done, 2 the harness failed) and the reply
            out.writeInt(reply.length + 1);
            out.writeByte(code);
            out.write(reply);
            if (in.available() == 0) out.flush();
        }
        out.flush();
    }
}
