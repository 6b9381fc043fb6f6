package dev.concord;

import java.util.Objects;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The checks of the test programs, in place of a test framework: each failed check prints what
 * went wrong on standard error and is counted, and the program exits 1 if any failed. Checks may
 * be made from any thread.
 */
final class Checks {
    private static final AtomicInteger made = new AtomicInteger();
    private static final AtomicInteger failed = new AtomicInteger();

    private Checks() {}

    /** Something to run that may throw, as a Runnable may not. */
    interface Call {
        void run() throws Exception;
    }

    /** Checks that {@code condition} holds. */
    static boolean check(boolean condition, String what) {
        made.incrementAndGet();
        if (!condition) {
            failed.incrementAndGet();
            System.err.println("check failed: " + what);
        }
        return condition;
    }

    /** Checks that {@code actual} equals {@code expected}. */
    static boolean equal(Object expected, Object actual, String what) {
        return check(Objects.equals(expected, actual), what + ": expected <" + expected + ">, got <" + actual + ">");
    }

    /**
     * Checks that {@code call} throws a ConcordException of the code {@code code}, named
     * {@code codeName}, whose message holds {@code fragment}; returns it, or null if it did not.
     */
    static ConcordException fails(int code, String codeName, String fragment, String what, Call call) {
        try {
            call.run();
        } catch (ConcordException e) {
            boolean right = check(e.code() == code, what + ": code " + e.code() + ", expected " + code + " (" + e + ")");
            right &= check(codeName.equals(e.codeName()), what + ": code name " + e.codeName() + ", expected " + codeName);
            right &= check(e.getMessage() != null && e.getMessage().contains(fragment),
                    what + ": message '" + e.getMessage() + "' lacks '" + fragment + "'");
            return right ? e : null;
        } catch (Exception e) {
            check(false, what + ": threw " + e + ", expected a ConcordException " + codeName);
            return null;
        }
        check(false, what + ": did not throw, expected a ConcordException " + codeName);
        return null;
    }

    /** Checks that {@code call} throws an exception of the class {@code type}. */
    static void throwsA(Class<? extends Throwable> type, String what, Call call) {
        try {
            call.run();
        } catch (Throwable e) {
            check(type.isInstance(e), what + ": threw " + e + ", expected a " + type.getSimpleName());
            return;
        }
        check(false, what + ": did not throw, expected a " + type.getSimpleName());
    }

    /** Runs a part of a test: an exception it throws is a failed check, and the next part runs. */
    static void part(String name, Call call) {
        System.err.println("-- " + name);
        try {
            call.run();
        } catch (Throwable e) {
            check(false, name + ": threw " + e);
            e.printStackTrace();
        }
    }

    /** Waits up to {@code millis} for {@code condition}; returns whether it came to hold. */
    static boolean waitFor(long millis, java.util.function.BooleanSupplier condition) throws InterruptedException {
        long end = System.nanoTime() + millis * 1_000_000;
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > end) return false;
            Thread.sleep(10);
        }
        return true;
    }

    /** How many checks failed. */
    static int failures() {
        return failed.get();
    }

    /** How many checks were made. */
    static int made() {
        return made.get();
    }
}
