// A server-side assignor whose output the conformance driver scripts, so that a saved trace's
// Join(target=..) / Heartbeat(target=..) become exactly the broker's target assignment.
//
// Configured in group.consumer.assignors; the JVM property kcheck.assignor.dir names a directory
// holding one file per member id: the partitions the next target gives the member, comma-separated:
// a number P is partition P of every topic the member subscribes to (one topic per trace), and
// TOPICID:P (Kafka's Uuid text) partition P of that topic only (one topic per spec partition, as
// the regex traces have). A member without a file gets nothing. Each
// call is appended to calls.log, so the driver can see that the target was computed within the
// heartbeat it sent. Written against PartitionAssignor / GroupSpec (group-coordinator-api).
//
// In-process (checker/conform/inprocess.py: Kafka's coordinator run in the checker's own JVM) the
// script is held in memory instead: SCRIPT, member id -> the same text as a file, set by the
// harness; no files are read and no calls.log is written.
package kcheck;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.PartitionAssignorException;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;

public class ScriptedAssignor implements ConsumerGroupPartitionAssignor {
    public static final String NAME = "kcheck-scripted";

    /** The script in memory (member id -> a file's text), or null: read the files. */
    public static volatile Map<String, String> SCRIPT = null;

    private static final class Assigned implements MemberAssignment {
        private final Map<Uuid, Set<Integer>> partitions;

        Assigned(Map<Uuid, Set<Integer>> partitions) {
            this.partitions = partitions;
        }

        @Override
        public Map<Uuid, Set<Integer>> partitions() {
            return partitions;
        }
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public GroupAssignment assign(GroupSpec group, SubscribedTopicDescriber topics)
            throws PartitionAssignorException {
        Path dir = Paths.get(System.getProperty("kcheck.assignor.dir", "."));
        Map<String, MemberAssignment> out = new HashMap<>();
        StringBuilder log = new StringBuilder();
        for (String memberId : new TreeSet<>(group.memberIds())) {
            Map<Uuid, Set<Integer>> partitions = new HashMap<>();
            Set<Uuid> subscribed = group.memberSubscription(memberId).subscribedTopicIds();
            Path file = dir.resolve(memberId);
            Set<Integer> wanted = new TreeSet<>();
            Map<Uuid, Set<Integer>> wantedOf = new HashMap<>();
            Map<String, String> script = SCRIPT;
            if (script != null ? script.containsKey(memberId) : Files.exists(file)) {
                try {
                    String text = script != null ? script.get(memberId)
                        : Files.readString(file, StandardCharsets.UTF_8);
                    for (String p : text.trim().split(",")) {
                        p = p.trim();
                        if (p.isBlank()) continue;
                        int colon = p.lastIndexOf(':');
                        if (colon < 0) {
                            wanted.add(Integer.parseInt(p));
                        } else {
                            wantedOf.computeIfAbsent(Uuid.fromString(p.substring(0, colon)), t -> new TreeSet<>())
                                .add(Integer.parseInt(p.substring(colon + 1)));
                        }
                    }
                } catch (IOException | IllegalArgumentException e) {
                    throw new PartitionAssignorException("kcheck: cannot read " + file + ": " + e);
                }
            }
            for (Uuid topic : subscribed) {
                Set<Integer> mine = new HashSet<>();
                for (int p : wanted) {
                    if (p < topics.numPartitions(topic)) mine.add(p);
                }
                for (int p : wantedOf.getOrDefault(topic, Set.of())) {
                    if (p < topics.numPartitions(topic)) mine.add(p);
                }
                if (!mine.isEmpty()) partitions.put(topic, mine);
            }
            out.put(memberId, new Assigned(partitions));
            log.append(memberId).append('=').append(wanted).append(wantedOf.isEmpty() ? "" : wantedOf.toString()).append(' ');
        }
        if (SCRIPT != null) {
            return new GroupAssignment(out);
        }
        try {
            Files.writeString(dir.resolve("calls.log"), log.toString().trim() + "\n",
                StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        } catch (IOException e) {
            // the log only helps the driver explain a divergence; the assignment stands
        }
        return new GroupAssignment(out);
    }
}
