import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The turns that the writers of one store take, whichever process they are in (SPEC.md §9,
/// "Writers take turns"): two locks on the store's side file `STORE-lock`, a door (byte 0) and the
/// store itself (byte 1).
///
/// A writer takes the door, then the store, and lets go of the door; it lets go of the store once
/// its transaction has ended. A writer that waits for the store therefore holds the door, so the
/// writer that had the store cannot take it again before the waiting one has had it: a long merge,
/// which takes a turn for each of its batches, never takes two in a row while a writer waits at
/// the door, by construction and without pausing. Writers that wait for the door itself take it
/// in no particular order (the system does not queue lock waits).
///
/// The locks are open file description locks (`F_OFD_SETLKW`), so they exclude each other between
/// threads and store objects of one process as between processes, and the system lets go of them
/// when a process dies. Where the platform or the file system has no such locks, or the side file
/// cannot be opened for writing, there are no turns: writers then wait for each other in SQLite's
/// busy handler, without the guarantee of order.
struct WriterTurns: Sendable {
    /// `STORE-lock`.
    let path: String
    /// The permissions the side file is created with: the store file's.
    let mode: mode_t
    /// How long a writer waits for its turn before it gives up.
    let patience: Duration

    /// How long a writer waits for another before it gives up (SQLite's busy timeout, too).
    static let defaultPatience = Duration.seconds(30)

    /// - Parameter path: the store's file. The side file is named after its resolved path, so
    ///   that writers that name the store through a symbolic link share it.
    init(store path: String, patience: Duration = Self.defaultPatience) {
        let resolved = realpath(path, nil).map { resolved in
            defer { free(resolved) }
            return String(cString: resolved)
        }
        self.path = (resolved ?? path) + "-lock"
        var status = stat()
        mode = stat(path, &status) == 0 ? status.st_mode & 0o666 : 0o644
        self.patience = patience
    }

    /// Runs `body` in this writer's turn, and rings the commit bell once it has returned (its
    /// transaction has committed), before the turn ends.
    /// - Throws: `TurnTimedOut` when another writer kept the store for longer than `patience`.
    func withTurn<T>(_ body: () throws -> T) throws -> T {
        let descriptor = try take()
        defer { if let descriptor { close(descriptor) } }
        let result = try body()
        if let descriptor { CommitBell.ring(descriptor) }
        return result
    }

    /// Waits for a turn. Returns the descriptor that holds it (closing it ends the turn), or nil
    /// when there are no turns here.
    private func take() throws -> Int32? {
        guard let descriptor = openSideFile() else { return nil }
        let deadline = ContinuousClock.now + patience
        for (byte, lock) in [(Self.door, true), (Self.store, true), (Self.door, false)] {
            switch Self.set(lock, byte: byte, on: descriptor, waitingUntil: deadline) {
            case .done:
                continue
            case .unsupported:
                close(descriptor)
                return nil
            case .timedOut:
                // The descriptor now belongs to the wait that goes on (`waitInBackground`).
                throw TurnTimedOut()
            }
        }
        return descriptor
    }

    /// Makes the side file if it is not there (as the first writer would), for an observer to
    /// watch. Whether it is there now, and what this type makes.
    func ensureSideFile() -> Bool {
        guard let descriptor = openSideFile() else { return false }
        close(descriptor)
        return true
    }

    /// Opens the side file for writing, creating it with the store file's permissions (set with
    /// `fchmod`, as the process's umask would narrow them) if it is not there. Nil if it cannot be
    /// opened for writing, or if it is not what this type makes (`isSideFile`).
    private func openSideFile() -> Int32? {
        while true {
            guard isSideFile() else { return nil }
            let descriptor = open(path, O_RDWR | O_CLOEXEC)
            if descriptor >= 0 { return descriptor }
            switch errno {
            case EINTR:
                continue
            case ENOENT:
                let created = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode)
                if created >= 0 {
                    fchmod(created, mode)
                    return created
                }
                if errno == EEXIST || errno == EINTR { continue }  // another writer made it first
                return nil
            default:
                return nil
            }
        }
    }

    /// Whether the file at `path` is missing, or a regular file of at most `CommitBell.fileBytes`
    /// bytes: the side file holds nothing but the commit bell. Anything else (another store named
    /// `STORE-lock`, say: a database is never that small) is left unopened, since closing a
    /// descriptor of a database this process has open would drop SQLite's locks on it (SPEC.md §9,
    /// "Touching a store's files"); its store then has no turns.
    func isSideFile() -> Bool {
        Self.isSideFile(at: path)
    }

    static func isSideFile(at path: String) -> Bool {
        var status = stat()
        guard lstat(path, &status) == 0 else { return errno == ENOENT }
        return status.st_mode & S_IFMT == S_IFREG && status.st_size <= CommitBell.fileBytes
    }

    /// Whether a writer holds the door: it waits for the store, and goes next. Only a glance (the
    /// answer may change at once), for tests and diagnostics.
    func isWriterWaiting() -> Bool {
        guard let commands = OpenFileDescriptionLocks.commands, isSideFile() else { return false }
        let descriptor = open(path, O_RDWR | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var probe = flock()
        probe.l_type = Int16(F_WRLCK)
        probe.l_whence = Int16(SEEK_SET)
        probe.l_start = off_t(Self.door)
        probe.l_len = 1
        return fcntl(descriptor, commands.get, &probe) == 0 && probe.l_type != Int16(F_UNLCK)
    }

    private static let door: Int64 = 0
    private static let store: Int64 = 1

    private enum Outcome { case done, unsupported, timedOut }

    /// Takes (or lets go of) the lock on `byte`, waiting until `deadline` at most.
    private static func set(_ lock: Bool, byte: Int64, on descriptor: Int32, waitingUntil deadline: ContinuousClock.Instant) -> Outcome {
        guard let commands = OpenFileDescriptionLocks.commands else { return .unsupported }
        switch request(commands.set, lock: lock, byte: byte, descriptor) {
        case 0:
            return .done
        case EAGAIN, EACCES:
            return waitInBackground(commands.setWaiting, byte: byte, descriptor, until: deadline)
        default:
            // EINVAL or ENOLCK: the file system keeps no such locks (some network file systems).
            return .unsupported
        }
    }

    /// Waits for the lock on a thread of its own (not one of a shared pool, which a stuck holder
    /// could drain), so that the wait can end at `deadline`. A wait given up keeps the descriptor
    /// and closes it once the lock comes or fails, letting go of all it holds (the door among it).
    private static func waitInBackground(_ command: Int32, byte: Int64, _ descriptor: Int32, until deadline: ContinuousClock.Instant) -> Outcome {
        enum State { case waiting, done(Outcome), abandoned }
        let state = LockedState(State.waiting)
        let finished = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            var result: Int32
            repeat { result = request(command, lock: true, byte: byte, descriptor) } while result == EINTR
            let outcome: Outcome = result == 0 ? .done : .unsupported
            let abandoned = state.withLock { state in
                if case .abandoned = state { return true }
                state = .done(outcome)
                return false
            }
            if abandoned { close(descriptor) }
            finished.signal()
        }
        let remaining = ContinuousClock.now.duration(to: deadline)
        let nanoseconds = max(0, remaining.components.seconds * 1_000_000_000 + remaining.components.attoseconds / 1_000_000_000)
        _ = finished.wait(timeout: .now() + .nanoseconds(Int(clamping: nanoseconds)))
        return state.withLock { state in
            if case .done(let outcome) = state { return outcome }
            state = .abandoned
            return .timedOut
        }
    }

    /// One `fcntl` lock request on one byte of `descriptor`: 0, or the `errno` it failed with.
    private static func request(_ command: Int32, lock: Bool, byte: Int64, _ descriptor: Int32) -> Int32 {
        var request = flock()
        request.l_type = Int16(lock ? F_WRLCK : F_UNLCK)
        request.l_whence = Int16(SEEK_SET)
        request.l_start = off_t(byte)
        request.l_len = 1
        request.l_pid = 0  // required of open file description locks
        return fcntl(descriptor, command, &request) == 0 ? 0 : errno
    }
}

/// A writer waited for its turn at the store for longer than `WriterTurns.patience`.
struct TurnTimedOut: Error {}

/// The `fcntl` commands of open file description locks, where the platform has them (Linux
/// since 3.15; Apple platforms, where libsqlite3 uses them too). The C headers define them as
/// macros that Swift does not import.
private enum OpenFileDescriptionLocks {
    static var commands: (get: Int32, set: Int32, setWaiting: Int32)? {
        #if os(Linux)
        (get: 36, set: 37, setWaiting: 38)
        #elseif canImport(Darwin)
        (get: 92, set: 90, setWaiting: 91)
        #else
        nil
        #endif
    }
}
