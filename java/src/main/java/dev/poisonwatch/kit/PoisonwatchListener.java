package dev.poisonwatch.kit;

import jakarta.jms.Connection;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageListener;
import jakarta.jms.Session;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.file.Path;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;

/**
 * Seed 002's agent wrapper around a message handler, on a transacted JMS session:
 *
 * <ul>
 *   <li>the handler returns: the session commits, and the attempt is recorded {@code acknowledged};
 *   <li>it throws {@link TemporaryUnavailableException}: recorded {@code temporarily_unavailable},
 *       then rolled back (the broker redelivers later); not counted by the fuse;
 *   <li>it throws anything else: recorded {@code rolled_back} with the exception's class, message and
 *       stack trace, then rolled back (without the rollback the message would not be redelivered);
 *       the fuse counts it.
 * </ul>
 *
 * <p>Every record is on disk before the rollback, outside the JMS transaction, so it is durable
 * before a redelivery can happen. When the fuse trips, this server's report goes to the {@link
 * FuseBoard}; once the board disables the setting ({@link FuseMode}), {@code onStop} runs on a
 * thread of its own (a listener may not stop its own connection) and later deliveries are rolled
 * back unprocessed. The board is read at start, on every trip and every {@code checkMillis}.
 * {@link #close} completes the log's current file.
 */
public final class PoisonwatchListener implements MessageListener, AutoCloseable {
    /** The agent's processing of one message. */
    @FunctionalInterface
    public interface Handler {
        void handle(Message message) throws Exception;
    }

    private final Handler handler;
    private final Session session;
    private final AttemptLog log;
    private final Fuse fuse;
    private final FuseBoard board;
    private final FuseMode mode;
    private final Runnable onStop;
    private final long checkMillis;
    private final String brokerName;
    private final String address;
    private final String queueName;
    private final String consumerId;
    private final String serverName;
    private final String activationId;
    private volatile boolean disabled;
    private long checkedAt;
    private int attempts;

    private PoisonwatchListener(Builder b) {
        this.handler = Objects.requireNonNull(b.handler, "handler");
        this.session = Objects.requireNonNull(b.session, "session");
        this.brokerName = Objects.requireNonNull(b.brokerName, "brokerName");
        this.address = Objects.requireNonNull(b.address, "address");
        this.queueName = b.queueName != null ? b.queueName : b.address;
        this.consumerId = Objects.requireNonNull(b.consumerId, "consumerId");
        this.serverName = b.serverName != null ? b.serverName : hostName();
        this.activationId = b.activationId != null ? b.activationId : UUID.randomUUID().toString();
        if (b.log == null && b.landing == null) {
            throw new IllegalArgumentException("say where attempts go: landing(path) or log(log)");
        }
        this.log = b.log != null ? b.log : new AttemptLog(b.landing, consumerId);
        this.fuse = new Fuse(b.maxFailures);
        this.board = b.board;
        this.mode = b.mode;
        this.onStop = b.onStop;
        this.checkMillis = b.checkMillis;
        try {
            if (!session.getTransacted()) {
                throw new IllegalArgumentException("the agent's session must be transacted");
            }
        } catch (JMSException e) {
            throw new IllegalStateException("cannot read the session's mode", e);
        }
        this.disabled = readBoard();
    }

    public static Builder builder() {
        return new Builder();
    }

    public String activationId() {
        return activationId;
    }

    public String serverName() {
        return serverName;
    }

    /** Whether the board has disabled this agent setting (it then processes nothing). */
    public boolean isDisabled() {
        return disabled;
    }

    public Fuse fuse() {
        return fuse;
    }

    /** Deliveries seen, processed or not. */
    public synchronized int attempts() {
        return attempts;
    }

    /** Complete the attempt log's current file (call after the consumer stopped). */
    @Override
    public synchronized void close() {
        log.close();
    }

    @Override
    public synchronized void onMessage(Message message) {
        attempts++;
        if (!disabled && board != null && System.currentTimeMillis() - checkedAt >= checkMillis) {
            disabled = readBoard();
            if (disabled) {
                stop();
            }
        }
        if (disabled) {
            rollback();
            return;
        }
        Instant at = Instant.now();
        try {
            handler.handle(message);
        } catch (TemporaryUnavailableException e) {
            record(message, at, "temporarily_unavailable", e);
            rollback();
            return;
        } catch (Exception | Error e) {
            failed(message, at, e);
            return;
        }
        try {
            session.commit();
        } catch (JMSException e) {
            failed(message, at, e); // the broker redelivers it: not an acknowledgement
            return;
        }
        record(message, at, "acknowledged", null);
        fuse.success();
    }

    private void failed(Message message, Instant at, Throwable e) {
        record(message, at, "rolled_back", e);
        rollback();
        if (fuse.failure(e.getClass().getName())) {
            report();
        }
    }

    private void report() {
        if (board == null) {
            disabled = mode.servers() <= 1;
        } else {
            try {
                board.report(consumerId, serverName, activationId, fuse.reason());
            } catch (JMSException e) {
                System.err.println("poisonwatch kit: cannot report the fuse of " + consumerId + ": " + e);
            }
            disabled = readBoard();
        }
        if (disabled) {
            stop();
        }
    }

    private boolean readBoard() {
        checkedAt = System.currentTimeMillis();
        if (board == null) {
            return disabled;
        }
        try {
            return board.isDisabled(consumerId, mode);
        } catch (JMSException e) {
            System.err.println("poisonwatch kit: cannot read the fuse board: " + e);
            return disabled;
        }
    }

    private void stop() {
        if (onStop != null) {
            Thread t = new Thread(onStop, "poisonwatch-fuse-" + consumerId);
            t.setDaemon(true);
            t.start();
        }
    }

    private void rollback() {
        try {
            session.rollback();
        } catch (JMSException e) {
            System.err.println("poisonwatch kit: rollback failed: " + e);
        }
    }

    private void record(Message m, Instant at, String outcome, Throwable e) {
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("attempted_at", AttemptLog.iso(at));
        row.put("broker_name", brokerName);
        row.put("address", address);
        row.put("queue_name", queueName);
        row.put("consumer_id", consumerId);
        row.put("server_name", serverName);
        row.put("activation_id", activationId);
        row.put("outcome", outcome);
        try {
            row.put("message_id", m.getJMSMessageID());
            row.put("correlation_id", m.getJMSCorrelationID());
            row.put("message_type", m.getJMSType());
            row.put("redelivered", m.getJMSRedelivered());
            row.put("group_id", stringProperty(m, "JMSXGroupID"));
            row.put("orig_address", stringProperty(m, "_AMQ_ORIG_ADDRESS"));
            row.put("orig_queue", stringProperty(m, "_AMQ_ORIG_QUEUE"));
            if (m.propertyExists("JMSXDeliveryCount")) {
                row.put("delivery_count", m.getIntProperty("JMSXDeliveryCount"));
            }
        } catch (JMSException | RuntimeException ex) {
            System.err.println("poisonwatch kit: cannot read the message's headers: " + ex);
        }
        if (e != null) {
            row.put("exception_class", e.getClass().getName());
            row.put("exception_message", cut(e.getMessage()));
            StringWriter trace = new StringWriter();
            e.printStackTrace(new PrintWriter(trace));
            row.put("stack_trace", cut(trace.toString()));
        }
        try {
            log.record(row);
        } catch (RuntimeException ex) {
            System.err.println("poisonwatch kit: cannot write the attempt log: " + ex);
        }
    }

    private static String stringProperty(Message m, String name) throws JMSException {
        return m.propertyExists(name) ? m.getStringProperty(name) : null;
    }

    private static String cut(String text) {
        if (text == null || text.length() <= AttemptLog.MAX_TEXT) {
            return text;
        }
        return text.substring(0, AttemptLog.MAX_TEXT);
    }

    private static String hostName() {
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (UnknownHostException e) {
            return "unknown-host";
        }
    }

    /** Options of a {@link PoisonwatchListener}. */
    public static final class Builder {
        private Handler handler;
        private Session session;
        private AttemptLog log;
        private Path landing;
        private String brokerName;
        private String address;
        private String queueName;
        private String consumerId;
        private String serverName;
        private String activationId;
        private int maxFailures = Fuse.DEFAULT_MAX_FAILURES;
        private FuseMode mode = FuseMode.ANY;
        private FuseBoard board;
        private Runnable onStop;
        private long checkMillis = 30_000;

        public Builder handler(Handler value) { handler = value; return this; }
        /** The consumer's session: transacted (Session.SESSION_TRANSACTED). */
        public Builder session(Session value) { session = value; return this; }
        public Builder log(AttemptLog value) { log = value; return this; }
        /** Where the log goes: {@code <landing>/jms_receive_attempts/}. */
        public Builder landing(Path value) { landing = value; return this; }
        public Builder brokerName(String value) { brokerName = value; return this; }
        /** The JMS queue or topic (Artemis: the address). */
        public Builder address(String value) { address = value; return this; }
        /** The subscription's queue (Artemis: the queue; default: the address). */
        public Builder queueName(String value) { queueName = value; return this; }
        /** The agent setting (seed 002: the launch setting's id). */
        public Builder consumerId(String value) { consumerId = value; return this; }
        public Builder serverName(String value) { serverName = value; return this; }
        public Builder activationId(String value) { activationId = value; return this; }
        /** M, the fuse's limit of consecutive failures of any type; N = M / 3. */
        public Builder maxFailures(int value) { maxFailures = value; return this; }
        public Builder mode(FuseMode value) { mode = Objects.requireNonNull(value); return this; }
        public Builder board(FuseBoard value) { board = value; return this; }
        /** Run (on a thread of its own) when the setting is disabled: stop the connection. */
        public Builder onStop(Runnable value) { onStop = value; return this; }
        /** Stop {@code connection} when the setting is disabled. */
        public Builder stopping(Connection connection) {
            onStop = () -> {
                try {
                    connection.stop();
                } catch (JMSException e) {
                    System.err.println("poisonwatch kit: cannot stop the connection: " + e);
                }
            };
            return this;
        }
        public Builder checkMillis(long value) { checkMillis = value; return this; }

        public PoisonwatchListener build() {
            return new PoisonwatchListener(this);
        }
    }
}
