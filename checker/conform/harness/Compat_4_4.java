// Kafka 4.4's group coordinator shard, built as the coordinator runtime builds it (compiled with
// InProcessCoordinator.java against 4.4's jars). 4.4: LogContext in common.utils.internals,
// GroupConfigManager(config, share config); otherwise as 4.3.
package kcheck;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.common.DirectoryId;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.message.JoinGroupRequestData;
import org.apache.kafka.common.message.JoinGroupResponseData;
import org.apache.kafka.common.message.OffsetFetchRequestData;
import org.apache.kafka.common.message.TxnOffsetCommitRequestData;
import org.apache.kafka.common.message.OffsetFetchResponseData;
import org.apache.kafka.common.metadata.PartitionRecord;
import org.apache.kafka.common.metadata.TopicRecord;
import org.apache.kafka.common.utils.internals.LogContext;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.coordinator.common.runtime.CoordinatorExecutor;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.common.runtime.CoordinatorResult;
import org.apache.kafka.coordinator.common.runtime.CoordinatorTimer;
import org.apache.kafka.coordinator.common.runtime.KRaftCoordinatorMetadataDelta;
import org.apache.kafka.coordinator.common.runtime.KRaftCoordinatorMetadataImage;
import org.apache.kafka.coordinator.group.GroupConfigManager;
import org.apache.kafka.coordinator.group.GroupCoordinatorConfig;
import org.apache.kafka.coordinator.group.GroupCoordinatorShard;
import org.apache.kafka.coordinator.group.metrics.GroupCoordinatorMetrics;
import org.apache.kafka.coordinator.group.modern.share.ShareGroupConfig;
import org.apache.kafka.image.MetadataDelta;
import org.apache.kafka.image.MetadataImage;
import org.apache.kafka.image.MetadataProvenance;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.timeline.SnapshotRegistry;

final class Compat {
    final SnapshotRegistry registry = new SnapshotRegistry(new LogContext("[kcheck] "));
    final GroupCoordinatorShard shard;
    // scheduled timeouts and executor tasks by key: a timeout fires only when asked (fire)
    final Map<String, Object> timers = new HashMap<>();
    final Map<String, Object> tasks = new HashMap<>();
    private MetadataImage image = MetadataImage.EMPTY;
    private final Map<String, Uuid> topics = new HashMap<>();

    Compat(Map<String, Object> props, Time time) {
        ConfigDef def = new ConfigDef();
        GroupCoordinatorConfig.CONFIG_DEF.configKeys().values().forEach(def::define);
        ShareGroupConfig.CONFIG_DEF.configKeys().values().forEach(k -> {
            if (!def.configKeys().containsKey(k.name)) def.define(k);
        });
        AbstractConfig all = new AbstractConfig(def, props, false);
        GroupCoordinatorConfig config = new GroupCoordinatorConfig(all);
        ShareGroupConfig shareConfig = new ShareGroupConfig(all);
        GroupConfigManager configs = new GroupConfigManager(config, shareConfig);
        CoordinatorTimer<CoordinatorRecord> timer = new CoordinatorTimer<>() {
            public void schedule(String key, long delay, TimeUnit unit, boolean retry,
                                 TimeoutOperation<CoordinatorRecord> op) { timers.put(key, op); }
            public void schedule(String key, long delay, TimeUnit unit, boolean retry, long backoff,
                                 TimeoutOperation<CoordinatorRecord> op) { timers.put(key, op); }
            public void scheduleIfAbsent(String key, long delay, TimeUnit unit, boolean retry,
                                         TimeoutOperation<CoordinatorRecord> op) { timers.putIfAbsent(key, op); }
            public void cancel(String key) { timers.remove(key); }
            public boolean isScheduled(String key) { return timers.containsKey(key); }
        };
        CoordinatorExecutor<CoordinatorRecord> executor = new CoordinatorExecutor<>() {
            public <R> boolean schedule(String key, TaskRunnable<R> task, TaskOperation<CoordinatorRecord, R> op) {
                return tasks.putIfAbsent(key, op) == null;
            }
            public boolean isScheduled(String key) { return tasks.containsKey(key); }
            public void cancel(String key) { tasks.remove(key); }
        };
        shard = (GroupCoordinatorShard) new GroupCoordinatorShard.Builder(config, configs)
            .withAuthorizerPlugin(Optional.empty())
            .withLogContext(new LogContext("[kcheck] "))
            .withSnapshotRegistry(registry)
            .withTime(time)
            .withTimer(timer)
            .withExecutor(executor)
            .withCoordinatorMetrics(new GroupCoordinatorMetrics())
            .withTopicPartition(new TopicPartition("__consumer_offsets", 0))
            .build();
        shard.onLoaded(new KRaftCoordinatorMetadataImage(image));
    }

    /** GroupCoordinatorShard.classicGroupJoin as GroupCoordinatorService.joinGroup calls it. */
    CoordinatorResult<?, CoordinatorRecord> classicGroupJoin(AuthorizableRequestContext context,
            JoinGroupRequestData request, CompletableFuture<JoinGroupResponseData> future) {
        // 4.4: the flag says a streams topology-description plugin is configured (GroupCoordinatorService.joinGroup passes
        // StreamsGroupTopologyDescriptionManager.isPluginConfigured()); none is here
        return shard.classicGroupJoin(context, request, future, false);
    }

    /** Runs the timeout KEY if it is scheduled (it is unscheduled first, as the runtime's timer
     *  does before it runs an operation); null if it is not. */
    @SuppressWarnings("unchecked")
    CoordinatorResult<?, CoordinatorRecord> fire(String key) {
        Object op = timers.remove(key);
        if (op == null) return null;
        return ((CoordinatorTimer.TimeoutOperation<CoordinatorRecord>) op).generateRecords();
    }

    /** The id of a topic the driver created (ZERO_UUID for another). */
    Uuid topicId(String name) {
        return topics.getOrDefault(name, Uuid.ZERO_UUID);
    }

    void resolveTopicIds(TxnOffsetCommitRequestData request) {
        // KafkaApis.handleTxnOffsetCommitRequest (4.4, KIP-1319): a topic named (v5 and older)
        // gets its id from the metadata cache
        for (TxnOffsetCommitRequestData.TxnOffsetCommitRequestTopic t : request.topics()) {
            if (Uuid.ZERO_UUID.equals(t.topicId())) t.setTopicId(topicId(t.name()));
        }
    }

    /** Every committed offset of a group (fetchOffsets without topics: all of them). */
    OffsetFetchResponseData.OffsetFetchResponseGroup fetchAllOffsets(OffsetFetchRequestData.OffsetFetchRequestGroup request) {
        return shard.fetchOffsets(request, Long.MAX_VALUE);
    }

    /** A topic in the metadata image (its id if it exists already), published to the shard. */
    Uuid createTopic(String name, int partitions) {
        Uuid known = topics.get(name);
        if (known != null) return known;
        Uuid id = Uuid.randomUuid();
        MetadataDelta delta = new MetadataDelta.Builder().setImage(image).build();
        delta.replay(new TopicRecord().setName(name).setTopicId(id));
        for (int p = 0; p < partitions; p++) {
            delta.replay(new PartitionRecord().setTopicId(id).setPartitionId(p).setReplicas(List.of(1))
                .setIsr(List.of(1)).setLeader(1).setLeaderEpoch(0).setPartitionEpoch(0)
                .setDirectories(List.of(DirectoryId.UNASSIGNED)));
        }
        image = delta.apply(MetadataProvenance.EMPTY);
        shard.onMetadataUpdate(new KRaftCoordinatorMetadataDelta(delta), new KRaftCoordinatorMetadataImage(image));
        topics.put(name, id);
        return id;
    }
}
