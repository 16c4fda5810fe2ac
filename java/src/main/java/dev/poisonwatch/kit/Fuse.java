package dev.poisonwatch.kit;

import java.util.Objects;

/**
 * Seed 002's circuit breaker for one agent setting on one server: it trips after {@code n}
 * consecutive failures with the same exception type or {@code m} consecutive failures of any type
 * ({@code n = m / 3}; defaults 3 and 10). A success resets both runs; a
 * {@link TemporaryUnavailableException} is not counted and breaks neither run. Not thread-safe:
 * one fuse per listener, whose session delivers one message at a time.
 */
public final class Fuse {
    public static final int DEFAULT_MAX_FAILURES = 10;

    private final int maxSameType;
    private final int maxAnyType;
    private int anyRun;
    private int sameRun;
    private String lastType;
    private boolean tripped;

    /** A fuse with M = {@code maxFailures} and N = M / 3 (at least 1). */
    public Fuse(int maxFailures) {
        if (maxFailures < 1) {
            throw new IllegalArgumentException("maxFailures must be at least 1, got " + maxFailures);
        }
        this.maxAnyType = maxFailures;
        this.maxSameType = Math.max(1, maxFailures / 3);
    }

    public Fuse() {
        this(DEFAULT_MAX_FAILURES);
    }

    public int maxSameType() {
        return maxSameType;
    }

    public int maxAnyType() {
        return maxAnyType;
    }

    /** A delivery that was processed and committed. */
    public void success() {
        anyRun = 0;
        sameRun = 0;
        lastType = null;
    }

    /**
     * A delivery that failed with an exception of {@code exceptionClass}; true when this failure
     * trips the fuse (it stays tripped).
     */
    public boolean failure(String exceptionClass) {
        Objects.requireNonNull(exceptionClass, "exceptionClass");
        anyRun++;
        sameRun = exceptionClass.equals(lastType) ? sameRun + 1 : 1;
        lastType = exceptionClass;
        if (!tripped && (sameRun >= maxSameType || anyRun >= maxAnyType)) {
            tripped = true;
            return true;
        }
        return false;
    }

    public boolean isTripped() {
        return tripped;
    }

    /** Why it tripped, for the report: the run that reached its limit. */
    public String reason() {
        if (sameRun >= maxSameType) {
            return sameRun + " consecutive failures of " + lastType;
        }
        return anyRun + " consecutive failures of any type";
    }
}
