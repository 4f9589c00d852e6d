// Decodes the group coordinator's records (the keys and values it writes to __consumer_offsets)
// with Kafka's own generated classes, so the conformance driver can read what ConsumerGroupDescribe
// does not show: a member's reconciliation state, its partitions pending revocation and their
// assignment epochs. Reads lines "KEYHEX VALUEHEX" ("-" for a tombstone) on stdin and writes one
// JSON line per record: {"type": ..., "key": {...}, "value": {...} or null}, or {"error": ...}.
// Mirrors CoordinatorRecordSerde.deserialize: the key's leading short is the record type (and the
// key's version), the value's leading short is the value's version.
package kcheck;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.coordinator.group.generated.CoordinatorRecordJsonConverters;
import org.apache.kafka.coordinator.group.generated.CoordinatorRecordType;

public class RecordDecoder {
    public static void main(String[] args) throws Exception {
        ObjectMapper json = new ObjectMapper();
        HexFormat hex = HexFormat.of();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            ObjectNode out = json.createObjectNode();
            try {
                String[] parts = line.trim().split(" ");
                ByteBuffer key = ByteBuffer.wrap(hex.parseHex(parts[0]));
                short type = key.getShort();
                CoordinatorRecordType recordType = CoordinatorRecordType.fromId(type);
                ApiMessage keyMessage = recordType.newRecordKey();
                keyMessage.read(new ByteBufferAccessor(key), type);
                out.put("type", recordType.name());
                out.set("key", CoordinatorRecordJsonConverters.writeRecordKeyAsJson(keyMessage));
                if (parts.length < 2 || parts[1].equals("-")) {
                    out.putNull("value");
                } else {
                    ByteBuffer value = ByteBuffer.wrap(hex.parseHex(parts[1]));
                    short version = value.getShort();
                    ApiMessage valueMessage = recordType.newRecordValue();
                    valueMessage.read(new ByteBufferAccessor(value), version);
                    out.set("value", CoordinatorRecordJsonConverters.writeRecordValueAsJson(valueMessage, version));
                }
            } catch (Exception e) {
                out.put("error", e.toString());
            }
            System.out.println(json.writeValueAsString(out));
            System.out.flush();
        }
    }
}
