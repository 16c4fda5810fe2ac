package dev.poisonwatch.kit;

/** Seed 002: how many servers' reports disable an agent setting. */
public enum FuseMode {
    /** One server's report disables the setting everywhere. */
    ANY(1),
    /** Reports from two or more different servers disable it; then it stops on every server. */
    MANY(2);

    private final int servers;

    FuseMode(int servers) {
        this.servers = servers;
    }

    /** How many different servers must report. */
    public int servers() {
        return servers;
    }
}
