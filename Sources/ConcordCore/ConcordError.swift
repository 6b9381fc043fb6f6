/// An error of Concord: a code to branch on, a message to show, and the error that caused it.
///
/// Every library module throws this one type (SPEC.md §12), as swift-nio's `FileSystemError`
/// does: the store, bundles and shared folders, sync keys and peer sessions. The `message` is one
/// line that says what went wrong and, where the remedy needs no command or API of an app, how to
/// remedy it ("restore it from a backup or another replica", "upgrade Concord"). A library
/// message never names a command: an app that has commands (`syncctl` does) adds its advice from
/// the `code`.
///
/// ```swift
/// do {
///     try store.merge(storeAt: other)
/// } catch where error.code == .copied {
///     // offer to fork the store: ConcordStore.fork(at:)
/// } catch {
///     print(error.message)
/// }
/// ```
public struct ConcordError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of error it is: a stable name, for a program to branch on and a log to record.
    /// New codes may be added; a code's name never changes.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// The code's stable name, such as `copied`.
        public var description: String { name }

        // MARK: Stores

        /// There is no store at the path given to open one.
        public static let missing = Code("missing")
        /// A file is already at the path of a store or bundle to create (`ConcordStore.create`,
        /// an exclusive bundle export).
        public static let exists = Code("exists")
        /// The file is not a Concord store: not SQLite, another application's database, a
        /// directory, not a regular file, or a store's SQLite side file.
        public static let notAStore = Code("notAStore")
        /// The store was written by a newer version of Concord, whose schema this build does not
        /// read.
        public static let newerSchema = Code("newerSchema")
        /// The store is damaged: SQLite reports corruption, or a row breaks Concord's invariants.
        public static let corrupt = Code("corrupt")
        /// The store cannot be written: a read-only file, directory or file system.
        public static let readOnly = Code("readOnly")
        /// A local change was refused (an empty title, a deleted record, a bad tag, a clock that
        /// cannot advance); the store is unchanged.
        public static let invalidChange = Code("invalidChange")
        /// Input from outside is not what it must be, and nothing of it was applied: malformed
        /// operations, a damaged or foreign bundle, a file that is not a bundle, a bad argument.
        public static let invalidInput = Code("invalidInput")
        /// No record matches an id or prefix, or a text is not a record id.
        public static let notFound = Code("notFound")
        /// Id digits match more than one record.
        public static let ambiguous = Code("ambiguous")
        /// Any other failure of the file system or SQLite: a file that cannot be read or written,
        /// a full disk, a store that stayed locked.
        public static let io = Code("io")
        /// The store file was copied (or restored, or moved to another file system) since it was
        /// last written: it refuses writes until it is forked (`ConcordStore.fork(at:)`) or
        /// declared moved (`ConcordStore.adoptLocation(at:)`), SPEC.md §9.1.
        public static let copied = Code("copied")
        /// Another process made the store another replica (`ConcordStore.fork(at:)`) after this
        /// store object opened it: it refuses writes and publishing under the old id; open the
        /// store again.
        public static let forked = Code("forked")
        /// The store's path names another file than the one this store object opened, or none:
        /// the store was wiped and created again, a backup restored over it, or it was moved away
        /// (SPEC.md §9.1). The object refuses writes, which no other process would find at the
        /// path; open the store again.
        public static let replaced = Code("replaced")
        /// Two different operations under one (replica, seq): two stores share a replica id, one
        /// being a copy of the other (SPEC.md §9.1). Thrown by a merge, which then applies nothing
        /// of its batch (its `cause` is the `OperationClash`); also the code of a shared folder's
        /// warning about a file whose clashing operations were left out.
        public static let clash = Code("clash")
        /// The store's sync key is no longer the one a write or a peer session was made for: it
        /// was replaced meanwhile (SPEC.md §15.1), and nothing was written.
        public static let keyReplaced = Code("keyReplaced")

        // MARK: Bundles, shared folders and sync keys

        /// A shared folder is missing, not a directory, of a newer layout, or cannot be written
        /// or listed.
        public static let folder = Code("folder")
        /// A bundle is encrypted (SPEC.md §13.1), and the store has no sync key to open it: the
        /// store needs the key the bundle was sealed with.
        public static let encryptedBundle = Code("encryptedBundle")
        /// The store has no sync key, and what was asked needs one (a peer session, an encrypted
        /// export).
        public static let noSyncKey = Code("noSyncKey")
        /// Text given as a version vector (`VersionVector(json:)`) is not a JSON object from
        /// replica id to sequence number.
        public static let notAVersionVector = Code("notAVersionVector")
        /// A sync key's text does not start with `concord-key-`.
        public static let wrongPrefix = Code("wrongPrefix")
        /// A sync key's text is of another format than 1 (`concord-key-2-…`).
        public static let unsupportedFormat = Code("unsupportedFormat")
        /// A sync key's text holds a character outside its base32 alphabet.
        public static let badCharacter = Code("badCharacter")
        /// A sync key's text has too few or too many characters.
        public static let wrongLength = Code("wrongLength")
        /// A sync key's characters are all valid but its checksum does not match: a typo.
        public static let checksumMismatch = Code("checksumMismatch")

        // MARK: Peer sessions (SPEC.md §15.8)

        /// The peer's first bytes are not a Concord peer's (bad magic, an oversized first frame).
        public static let notAPeer = Code("notAPeer")
        /// The peer speaks another protocol version.
        public static let versionMismatch = Code("versionMismatch")
        /// A handshake proof did not verify: one side does not hold the other's sync key.
        public static let wrongKey = Code("wrongKey")
        /// The peer sent a frame over the size limit.
        public static let frameTooLarge = Code("frameTooLarge")
        /// A frame failed authentication (changed, replayed, reordered, or from another session).
        public static let authenticationFailed = Code("authenticationFailed")
        /// The peer sent something the protocol does not allow there.
        public static let protocolViolation = Code("protocolViolation")
        /// Both stores of a peer session have the same replica id: one is a copy of the other.
        public static let sameReplica = Code("sameReplica")
        /// The peer ended the session with an `error` message; the message quotes its reason.
        public static let peerError = Code("peerError")
        /// The connection ended in the middle of a frame.
        public static let truncated = Code("truncated")
        /// The connection closed before the session finished, or could not be made; or a call on
        /// a store object that was closed (`ConcordStore.close()`).
        public static let closed = Code("closed")
        /// An operation is too large to travel in a batch.
        public static let operationTooLarge = Code("operationTooLarge")
        /// The session has used all its frame counters.
        public static let counterExhausted = Code("counterExhausted")
        /// A timeout of the transport (SPEC.md §15.7).
        public static let timedOut = Code("timedOut")
        /// This side ended the session: a store that failed to apply a batch or to be read, a
        /// server shutting down or full, an address it cannot listen on.
        public static let local = Code("local")
        /// A relay (SPEC.md §16) refused a request, answered with something that breaks the
        /// protocol, or could not be reached.
        public static let relay = Code("relay")
        /// The store's replica was retired by another replica (SPEC.md §5.8, "Retiring a
        /// replica"): it takes no local write and no sync until it continues under a new id
        /// (`ConcordStore.fork(at:)`).
        public static let retired = Code("retired")

        /// Every code this build knows, in the order of SPEC.md §12's table.
        package static let all: [Code] = [
            .missing, .exists, .notAStore, .newerSchema, .corrupt, .readOnly, .invalidChange, .invalidInput, .notFound,
            .ambiguous, .io, .copied, .forked, .replaced, .clash, .keyReplaced,
            .folder, .encryptedBundle, .noSyncKey, .notAVersionVector,
            .wrongPrefix, .unsupportedFormat, .badCharacter, .wrongLength, .checksumMismatch,
            .notAPeer, .versionMismatch, .wrongKey, .frameTooLarge, .authenticationFailed, .protocolViolation, .sameReplica,
            .peerError, .truncated, .closed, .operationTooLarge, .counterExhausted, .timedOut, .local, .relay, .retired,
        ]

        /// The known code of that name, or `nil`.
        package init?(name: String) {
            guard let code = Self.all.first(where: { $0.name == name }) else { return nil }
            self = code
        }
    }

    /// What kind of error it is.
    public var code: Code
    /// One line: what went wrong and, where the remedy needs no command, how to remedy it. It
    /// never names a command of an app.
    public var message: String
    /// The error that caused this one, if there is one: a SQLite error, a decoding error, the
    /// `OperationClash` of a clash. Equality and hashing ignore it.
    public var cause: (any Error)?

    /// An error of `code` with `message`, caused by `cause`.
    public init(_ code: Code, _ message: String, cause: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    /// The message.
    public var description: String { message }

    /// Whether both have the same code and message (the causes are not compared).
    public static func == (lhs: ConcordError, rhs: ConcordError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message
    }

    /// Hashes the code and the message (not the cause).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
    }
}
