package dev.poisonwatch.kit.example;

import dev.poisonwatch.kit.FuseBoard;
import dev.poisonwatch.kit.FuseMode;
import dev.poisonwatch.kit.PoisonwatchListener;
import dev.poisonwatch.kit.TemporaryUnavailableException;
import jakarta.jms.Connection;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.Session;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;

/**
 * An agent of seed 002's platform for the kit's end-to-end tests: it consumes one queue of a real
 * Artemis through the kit and behaves as told ({@code --behaviour}):
 * {@code healthy}; {@code bug} (always IllegalStateException); {@code transient:K} (an undetectable
 * transient failure, UncheckedIOException, on the first K deliveries of each message);
 * {@code temporary:K} (TemporaryUnavailableException on the first K deliveries). It exits when no
 * delivery came for {@code --idle} seconds or when the fuse stopped it, and prints one line
 * starting with "@@" (JSON: attempts, disabled, tripped, activation_id).
 */
public final class Agent {
    private Agent() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> opt = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            opt.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        String behaviour = opt.getOrDefault("behaviour", "healthy");
        String[] parts = behaviour.split(":");
        int k = parts.length > 1 ? Integer.parseInt(parts[1]) : 0;
        long idleMillis = (long) (Double.parseDouble(opt.getOrDefault("idle", "3")) * 1000);
        int haltAfter = Integer.parseInt(opt.getOrDefault("halt-after", "0"));

        ActiveMQConnectionFactory factory =
                new ActiveMQConnectionFactory(opt.get("url"), opt.get("user"), opt.get("password"));
        try (Connection connection = factory.createConnection()) {
            Session session = connection.createSession(Session.SESSION_TRANSACTED);
            Session boardSession = connection.createSession(Session.AUTO_ACKNOWLEDGE);
            CountDownLatch stopped = new CountDownLatch(1);
            long[] last = {System.currentTimeMillis()};
            PoisonwatchListener listener = PoisonwatchListener.builder()
                    .session(session)
                    .landing(Path.of(opt.get("landing")))
                    .brokerName(opt.get("broker-name"))
                    .address(opt.get("queue"))
                    .consumerId(opt.get("consumer-id"))
                    .serverName(opt.get("server"))
                    .maxFailures(Integer.parseInt(opt.getOrDefault("max-failures", "10")))
                    .mode(FuseMode.valueOf(opt.getOrDefault("mode", "ANY")))
                    .board(new FuseBoard(boardSession))
                    .checkMillis(500)
                    .onStop(() -> {
                        try {
                            connection.stop();
                        } catch (JMSException e) {
                            System.err.println("stop failed: " + e);
                        }
                        stopped.countDown();
                    })
                    .handler(m -> handle(behaviour, parts[0], k, m))
                    .build();
            if (!listener.isDisabled()) {
                MessageConsumer consumer = session.createConsumer(session.createQueue(opt.get("queue")));
                consumer.setMessageListener(m -> {
                    last[0] = System.currentTimeMillis();
                    listener.onMessage(m);
                    if (haltAfter > 0 && listener.attempts() >= haltAfter) {
                        Runtime.getRuntime().halt(137); // kill -9 as far as the log can tell
                    }
                });
                connection.start();
                while (!stopped.await(100, TimeUnit.MILLISECONDS)) {
                    if (System.currentTimeMillis() - last[0] > idleMillis) {
                        break;
                    }
                }
            }
            connection.stop();
            listener.close();
            System.out.println("@@{\"attempts\": " + listener.attempts()
                    + ", \"disabled\": " + listener.isDisabled()
                    + ", \"tripped\": " + listener.fuse().isTripped()
                    + ", \"activation_id\": \"" + listener.activationId() + "\"}");
        }
    }

    private static void handle(String behaviour, String kind, int k, Message m) throws JMSException {
        int delivery = m.propertyExists("JMSXDeliveryCount") ? m.getIntProperty("JMSXDeliveryCount") : 1;
        switch (kind) {
            case "healthy" -> { }
            case "bug" -> throw new IllegalStateException("bug in the agent: " + m.getJMSMessageID());
            case "transient" -> {
                if (delivery <= k) {
                    throw new UncheckedIOException(new java.io.IOException("service down"));
                }
            }
            case "temporary" -> {
                if (delivery <= k) {
                    throw new TemporaryUnavailableException("document not yet replicated");
                }
            }
            default -> throw new IllegalArgumentException("unknown behaviour " + behaviour);
        }
    }
}
