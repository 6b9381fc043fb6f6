package dev.concord;

import java.util.concurrent.TimeUnit;

/**
 * A live sync from the JVM: creates a store, sets its sync key, starts a live sync with the peer
 * that {@code syncctl serve} serves at ADDRESS, waits until it is live, adds a reminder titled
 * TITLE, waits until the session has sent it, stops the live sync and prints the store's dump as
 * its last line. On a failure (no live session within 20 s, the reminder not sent within 20 s,
 * the live sync ending by itself), prints one line on standard error and exits 1.
 *
 * <p>Usage: {@code java ... dev.concord.Live STORE KEY ADDRESS TITLE}
 */
public final class Live {
    private static final long WAIT_MILLIS = 20_000;

    private Live() {}

    /** What the live sync's listener heard, for the main thread to wait on. */
    private static final class Heard implements LiveListener {
        private boolean live;
        /** The most operations the current session reported sent ("live" or "progress"). */
        private long operationsSent;
        private ConcordException end;
        private boolean ended;

        @Override
        public synchronized void onEvent(LiveEvent event) {
            switch (event.kind()) {
                case "live":
                    live = true;
                    operationsSent = event.number("operationsSent");
                    break;
                case "progress":
                    operationsSent = Math.max(operationsSent, event.number("operationsSent"));
                    break;
                case "disconnected":
                    // A new session counts from 0; its exchange sends again what the peer lacks.
                    operationsSent = 0;
                    break;
                default:
                    break;
            }
            notifyAll();
        }

        @Override
        public synchronized void onEnd(ConcordException errorOrNull) {
            ended = true;
            end = errorOrNull;
            notifyAll();
        }

        /** Waits until {@code condition} holds; false if the time ran out. Fails if the sync ended. */
        synchronized boolean await(java.util.function.BooleanSupplier condition) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WAIT_MILLIS);
            while (!condition.getAsBoolean()) {
                if (ended) fail("the live sync ended: " + (end == null ? "without an error" : end.codeName() + ": " + end.getMessage()));
                long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
                if (left <= 0) return false;
                wait(left);
            }
            return true;
        }
    }

    /** Runs the live sync. */
    public static void main(String[] arguments) throws InterruptedException {
        if (arguments.length != 4) {
            System.err.println("usage: Live STORE KEY ADDRESS TITLE");
            System.exit(64);
        }
        try (ConcordStore store = ConcordStore.create(arguments[0], "jvm live")) {
            store.setKey(arguments[1], false);
            Heard heard = new Heard();
            Observation sync = store.syncPeerLive(arguments[2], heard);
            if (!heard.await(() -> heard.live)) fail("no live session with " + arguments[2] + " within 20 s");
            store.addReminder(new ReminderDraft(arguments[3]));
            // Every operation this replica wrote (the reminder's) counts as sent once the session
            // reports at least that many: the ones received from the peer are not sent back.
            long written = ownOperations(store);
            if (!heard.await(() -> heard.operationsSent >= written)) {
                fail("the live session did not send the reminder within 20 s");
            }
            sync.close();
            System.out.println(store.dump());
        } catch (ConcordException e) {
            fail(e.codeName() + ": " + e.getMessage());
        }
    }

    /** How many operations this replica wrote: its own entry of the version vector. */
    private static long ownOperations(ConcordStore store) {
        JsonObject status = JsonObject.parse(store.statusJson(), "the status");
        Object vector = status.value("versionVector");
        return JsonObject.of(vector, "the version vector").number(store.replicaId());
    }

    private static void fail(String message) {
        System.err.println("live: " + message);
        System.exit(1);
    }
}
