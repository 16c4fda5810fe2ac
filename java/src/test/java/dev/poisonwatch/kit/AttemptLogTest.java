package dev.poisonwatch.kit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class AttemptLogTest {
    @TempDir
    Path landing;

    @Test
    void writesWholeFilesOfContractColumns() throws IOException {
        try (AttemptLog log = new AttemptLog(landing, "agent/orders", 2, 60_000)) {
            for (int i = 0; i < 3; i++) {
                log.record(Map.of("message_id", "ID:" + i, "outcome", "acknowledged",
                        "delivery_count", i, "exception_message", "\"quoted\"\n\u001b[2J"));
            }
            assertEquals(1, log.files().size(), "rotated after 2 records; the third is buffered");
        }
        List<Path> files;
        try (var s = Files.list(landing.resolve("jms_receive_attempts"))) {
            files = s.sorted().toList();
        }
        assertEquals(2, files.size());
        assertTrue(files.get(0).getFileName().toString().startsWith("agent_orders-"));
        String first = Files.readAllLines(files.get(0), StandardCharsets.UTF_8).get(0);
        assertTrue(first.startsWith("{\"attempted_at\":null,\"broker_name\":null,"), first);
        assertTrue(first.contains("\"exception_message\":\"\\\"quoted\\\"\\n\\u001B[2J\""), first);
        assertTrue(first.contains("\"delivery_count\":0"), first);
    }

    @Test
    void refusesColumnsOutsideTheContract() {
        try (AttemptLog log = new AttemptLog(landing, "a")) {
            assertThrows(IllegalArgumentException.class, () -> log.record(Map.of("body", "x")));
        }
    }

    @Test
    void recoversADeadWritersBufferCutAfterItsLastRecord() throws IOException {
        Path folder = landing.resolve("jms_receive_attempts");
        Files.createDirectories(folder);
        Files.writeString(folder.resolve(".dead-1.jsonl.part"), "{\"a\":1}\n{\"a\":2}\n{\"a\":");
        Files.writeString(folder.resolve(".empty-1.jsonl.part"), "{\"half");
        try (AttemptLog log = new AttemptLog(landing, "b")) {
            assertEquals(List.of(folder.resolve("dead-1.jsonl")), log.recovered());
        }
        assertEquals("{\"a\":1}\n{\"a\":2}\n", Files.readString(folder.resolve("dead-1.jsonl")));
        assertTrue(Files.notExists(folder.resolve(".empty-1.jsonl.part")));
    }
}
