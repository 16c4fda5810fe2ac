package dev.poisonwatch.kit;

/**
 * A transient failure the agent can detect (seed 002: the document is not yet replicated to this
 * server). The kit rolls the message back for the broker to redeliver later, records the attempt as
 * {@code temporarily_unavailable} and does not count it towards the fuse.
 */
public class TemporaryUnavailableException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public TemporaryUnavailableException(String message) {
        super(message);
    }

    public TemporaryUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
