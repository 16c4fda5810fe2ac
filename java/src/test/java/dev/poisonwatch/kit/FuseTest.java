package dev.poisonwatch.kit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class FuseTest {
    @Test
    void defaultsAreSeed002s() {
        Fuse fuse = new Fuse();
        assertEquals(3, fuse.maxSameType());
        assertEquals(10, fuse.maxAnyType());
    }

    @Test
    void tripsAfterNOfOneType() {
        Fuse fuse = new Fuse();
        assertFalse(fuse.failure("a.Bug"));
        assertFalse(fuse.failure("a.Bug"));
        assertTrue(fuse.failure("a.Bug"));
        assertTrue(fuse.isTripped());
        assertEquals("3 consecutive failures of a.Bug", fuse.reason());
        assertFalse(fuse.failure("a.Bug"), "reports once");
    }

    @Test
    void tripsAfterMOfAnyTypes() {
        Fuse fuse = new Fuse();
        for (int i = 1; i < 10; i++) {
            assertFalse(fuse.failure(i % 2 == 0 ? "a.X" : "a.Y"), "failure " + i);
        }
        assertTrue(fuse.failure("a.X"));
        assertEquals("10 consecutive failures of any type", fuse.reason());
    }

    @Test
    void aSuccessResetsBothRuns() {
        Fuse fuse = new Fuse();
        fuse.failure("a.Bug");
        fuse.failure("a.Bug");
        fuse.success();
        assertFalse(fuse.failure("a.Bug"));
        assertFalse(fuse.failure("a.Bug"));
        assertTrue(fuse.failure("a.Bug"));
    }

    @Test
    void mSetsN() {
        Fuse fuse = new Fuse(30);
        assertEquals(10, fuse.maxSameType());
        assertEquals(1, new Fuse(2).maxSameType());
        assertThrows(IllegalArgumentException.class, () -> new Fuse(0));
    }
}
