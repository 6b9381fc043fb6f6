package dev.concord;

import java.util.ArrayList;
import java.util.List;

/**
 * A listener that keeps what it hears, for the tests to wait for and look at: each change, the
 * thread it heard it on, and the end of the stream.
 */
final class RecordingListener implements ChangeListener {
    private final List<Change> changes = new ArrayList<>();
    private final List<Thread> threads = new ArrayList<>();
    private final List<ConcordException> ends = new ArrayList<>();
    private int endsWithoutError;

    @Override
    public synchronized void onChange(Change change) {
        changes.add(change);
        threads.add(Thread.currentThread());
    }

    @Override
    public synchronized void onEnd(ConcordException errorOrNull) {
        if (errorOrNull == null) {
            endsWithoutError++;
        } else {
            ends.add(errorOrNull);
        }
    }

    synchronized List<Change> changes() {
        return new ArrayList<>(changes);
    }

    synchronized List<Thread> threads() {
        return new ArrayList<>(threads);
    }

    synchronized int changeCount() {
        return changes.size();
    }

    /** The errors the stream ended with, and the ends without one, as a count. */
    synchronized List<ConcordException> endErrors() {
        return new ArrayList<>(ends);
    }

    synchronized int endCount() {
        return ends.size() + endsWithoutError;
    }

    /** Whether a change heard so far names {@code record} ("reminder:ID"). */
    synchronized boolean heard(String record) {
        for (Change change : changes) {
            if (change.records().contains(record)) return true;
        }
        return false;
    }

    /** The first change heard that names {@code record}, or null. */
    synchronized Change changeNaming(String record) {
        for (Change change : changes) {
            if (change.records().contains(record)) return change;
        }
        return null;
    }
}
