package dev.poisonwatch.kit;

import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.QueueBrowser;
import jakarta.jms.Session;
import java.util.Enumeration;
import java.util.Set;
import java.util.TreeSet;

/**
 * Where servers report a tripped fuse (seed 002): a durable queue on the broker they all share,
 * {@code poisonwatch.fuse}, one persistent message per report with the properties {@code
 * consumer_id}, {@code server_name}, {@code activation_id} and {@code reason}. An agent setting is
 * disabled while reports from {@link FuseMode#servers()} different servers are on the board; an
 * operator re-enables it by removing its reports. The board's session is its own,
 * non-transacted: a report is sent whether the failed delivery's transaction commits or not.
 */
public final class FuseBoard {
    public static final String QUEUE = "poisonwatch.fuse";

    private final Session session;
    private final Queue queue;

    /** {@code session}: a non-transacted session of its own (AUTO_ACKNOWLEDGE). */
    public FuseBoard(Session session) throws JMSException {
        if (session.getTransacted()) {
            throw new IllegalArgumentException("the fuse board needs a non-transacted session");
        }
        this.session = session;
        this.queue = session.createQueue(QUEUE);
    }

    /** Put this server's report for {@code consumerId} on the board. */
    public synchronized void report(
            String consumerId, String serverName, String activationId, String reason)
            throws JMSException {
        Message report = session.createMessage();
        report.setStringProperty("consumer_id", consumerId);
        report.setStringProperty("server_name", serverName);
        report.setStringProperty("activation_id", activationId);
        report.setStringProperty("reason", reason);
        try (MessageProducer producer = session.createProducer(queue)) {
            producer.send(report);
        }
    }

    /** The servers with a report for {@code consumerId} on the board. */
    public synchronized Set<String> servers(String consumerId) throws JMSException {
        Set<String> out = new TreeSet<>();
        try (QueueBrowser browser = session.createBrowser(queue, "consumer_id = " + literal(consumerId))) {
            Enumeration<?> reports = browser.getEnumeration();
            while (reports.hasMoreElements()) {
                Message m = (Message) reports.nextElement();
                String server = m.getStringProperty("server_name");
                if (server != null) {
                    out.add(server);
                }
            }
        }
        return out;
    }

    /** Whether {@code consumerId} is disabled under {@code mode}. */
    public boolean isDisabled(String consumerId, FuseMode mode) throws JMSException {
        return servers(consumerId).size() >= mode.servers();
    }

    /** A JMS selector string literal: single quotes doubled. */
    static String literal(String value) {
        return "'" + value.replace("'", "''") + "'";
    }
}
