package dev.poisonwatch.kit;

import java.io.ByteArrayOutputStream;
import java.io.Closeable;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import tools.jackson.core.JsonGenerator;
import tools.jackson.core.ObjectWriteContext;
import tools.jackson.core.json.JsonFactory;

/**
 * {@code jms_receive_attempts} landing records (poisonwatch's landing contract), one JSON line per
 * delivery, in {@code <landing>/jms_receive_attempts/}.
 *
 * <p>Each record is forced to disk before {@link #record} returns, so the caller can write it
 * before it rolls back and the record is durable before the broker can redeliver. Records go to a
 * hidden {@code .NAME.jsonl.part} file, locked while it is written, and renamed to {@code
 * NAME.jsonl} every {@code rotateRecords} records, every {@code rotateMillis} and at {@link
 * #close}: {@code poisonwatch ingest} skips hidden files and never reads half a file. A log that
 * opens renames every unlocked {@code .part} file (its writer died) to its complete name, cut after
 * its last whole record.
 */
public final class AttemptLog implements Closeable {
    public static final String DATASET = "jms_receive_attempts";
    /** The contract's columns, in its order. */
    public static final List<String> COLUMNS = List.of(
            "attempted_at", "broker_name", "address", "queue_name", "message_id", "correlation_id",
            "group_id", "delivery_count", "redelivered", "orig_address", "orig_queue",
            "message_type", "consumer_id", "server_name", "activation_id", "outcome",
            "exception_class", "exception_message", "stack_trace");
    /** Longest exception message and stack trace kept, in characters. */
    public static final int MAX_TEXT = 4000;

    private static final Pattern PART = Pattern.compile("\\.(?<name>.+\\.jsonl)\\.part");
    private static final DateTimeFormatter STAMP =
            DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmssSSSSSS").withZone(ZoneOffset.UTC);
    private static final DateTimeFormatter ISO =
            DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'").withZone(ZoneOffset.UTC);

    private final Path folder;
    private final String prefix;
    private final int rotateRecords;
    private final long rotateMillis;
    private final JsonFactory json = new JsonFactory();
    private final List<Path> files = new ArrayList<>();
    private final List<Path> recovered;
    private FileChannel channel;
    private FileLock lock;
    private Path part;
    private Path complete;
    private int records;
    private long openedAt;
    private int sequence;

    public AttemptLog(Path landing, String fileprefix, int rotateRecords, long rotateMillis) {
        if (rotateRecords < 1 || rotateMillis < 1) {
            throw new IllegalArgumentException("rotateRecords and rotateMillis must be positive");
        }
        this.folder = landing.resolve(DATASET);
        this.prefix = safe(fileprefix);
        this.rotateRecords = rotateRecords;
        this.rotateMillis = rotateMillis;
        try {
            Files.createDirectories(folder);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create " + folder, e);
        }
        this.recovered = recoverBuffers(folder);
    }

    public AttemptLog(Path landing, String fileprefix) {
        this(landing, fileprefix, 500, 30_000);
    }

    /** The dataset folder this log writes to. */
    public Path folder() {
        return folder;
    }

    /** Complete files written so far. */
    public synchronized List<Path> files() {
        return List.copyOf(files);
    }

    /** Files of dead writers that this log completed when it opened. */
    public List<Path> recovered() {
        return recovered;
    }

    /** An instant as the contract writes times: ISO-8601 UTC with microseconds. */
    public static String iso(Instant at) {
        return ISO.format(at);
    }

    /** Write one record (keys outside {@link #COLUMNS} are refused) and force it to disk. */
    public synchronized void record(Map<String, ?> row) {
        for (String key : row.keySet()) {
            if (!COLUMNS.contains(key)) {
                throw new IllegalArgumentException("not a jms_receive_attempts column: " + key);
            }
        }
        try {
            if (channel == null) {
                open();
            }
            ByteBuffer line = ByteBuffer.wrap(line(row));
            while (line.hasRemaining()) {
                channel.write(line);
            }
            channel.force(false);
            records++;
            if (records >= rotateRecords || System.currentTimeMillis() - openedAt >= rotateMillis) {
                rotate();
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + part, e);
        }
    }

    private byte[] line(Map<String, ?> row) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream(512);
        try (JsonGenerator gen = json.createGenerator(ObjectWriteContext.empty(), out)) {
            gen.writeStartObject();
            for (String column : COLUMNS) {
                Object value = row.get(column);
                gen.writeName(column);
                if (value == null) {
                    gen.writeNull();
                } else if (value instanceof Boolean b) {
                    gen.writeBoolean(b);
                } else if (value instanceof Integer i) {
                    gen.writeNumber(i);
                } else if (value instanceof Long l) {
                    gen.writeNumber(l);
                } else {
                    gen.writeString(value.toString());
                }
            }
            gen.writeEndObject();
        }
        out.write('\n');
        return out.toByteArray();
    }

    private void open() throws IOException {
        sequence++;
        String name = prefix + "-" + ProcessHandle.current().pid() + "-"
                + STAMP.format(Instant.now()) + "-" + sequence + ".jsonl";
        complete = folder.resolve(name);
        part = folder.resolve("." + name + ".part");
        channel = FileChannel.open(part, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
        lock = channel.lock();
        records = 0;
        openedAt = System.currentTimeMillis();
    }

    private void rotate() throws IOException {
        if (channel == null) {
            return;
        }
        channel.force(true);
        // Renamed while still locked, so a log that opens never takes it for a dead writer's.
        if (records > 0) {
            Files.move(part, complete, StandardCopyOption.ATOMIC_MOVE);
            files.add(complete);
        } else {
            Files.deleteIfExists(part);
        }
        lock.release();
        channel.close();
        channel = null;
    }

    /** Complete the current file (if any records) and stop. */
    @Override
    public synchronized void close() {
        try {
            rotate();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot complete " + part, e);
        }
    }

    /**
     * Rename the {@code .part} buffers of dead writers in {@code folder} to their complete names,
     * cut after the last whole record (an empty one is removed); the files completed.
     */
    public static List<Path> recoverBuffers(Path folder) {
        List<Path> out = new ArrayList<>();
        try (DirectoryStream<Path> parts = Files.newDirectoryStream(folder, ".*.jsonl.part")) {
            for (Path buffer : parts) {
                Matcher m = PART.matcher(buffer.getFileName().toString());
                if (m.matches()) {
                    Path done = recoverOne(buffer, folder.resolve(m.group("name")));
                    if (done != null) {
                        out.add(done);
                    }
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot list " + folder, e);
        }
        return out;
    }

    private static Path recoverOne(Path buffer, Path target) throws IOException {
        try (FileChannel ch = FileChannel.open(buffer, StandardOpenOption.READ,
                StandardOpenOption.WRITE)) {
            FileLock held;
            try {
                held = ch.tryLock();
            } catch (OverlappingFileLockException e) {
                return null; // this JVM writes it
            }
            if (held == null) {
                return null; // its writer is alive
            }
            try {
                if (!Files.exists(buffer)) {
                    return null; // completed by its writer before we locked it
                }
                byte[] data = Files.readAllBytes(buffer);
                int cut = data.length;
                while (cut > 0 && data[cut - 1] != '\n') {
                    cut--;
                }
                ch.truncate(cut);
                ch.force(true);
                if (cut == 0) {
                    Files.deleteIfExists(buffer);
                    return null;
                }
                Path done = Files.exists(target)
                        ? target.resolveSibling(target.getFileName().toString()
                                .replaceFirst("\\.jsonl$", "-recovered.jsonl"))
                        : target;
                Files.move(buffer, done, StandardCopyOption.ATOMIC_MOVE);
                return done;
            } finally {
                held.release();
            }
        }
    }

    private static String safe(String text) {
        StringBuilder out = new StringBuilder();
        for (char ch : text.toCharArray()) {
            out.append(Character.isLetterOrDigit(ch) || ch == '.' || ch == '_' || ch == '-'
                    ? ch : '_');
        }
        return out.length() > 60 ? out.substring(0, 60) : out.toString();
    }
}
