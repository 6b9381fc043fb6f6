/// Why a peer session ended without finishing (SPEC.md §15.8): a code to act on, and one line
/// that says what happened, to show as it is.
public struct PeerFailure: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure it is; new codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// The peer's first bytes are not a Concord peer's (bad magic, an oversized first frame).
        public static let notAPeer = Code("notAPeer")
        /// The peer speaks another protocol version.
        public static let versionMismatch = Code("versionMismatch")
        /// A proof did not verify: one side does not hold the other's sync key.
        public static let wrongKey = Code("wrongKey")
        /// A frame was over the size limit.
        public static let frameTooLarge = Code("frameTooLarge")
        /// A frame failed authentication (changed, replayed, reordered, or from another session).
        public static let authenticationFailed = Code("authenticationFailed")
        /// The peer sent something the protocol does not allow there.
        public static let protocolViolation = Code("protocolViolation")
        /// Both stores have the same replica id.
        public static let sameReplica = Code("sameReplica")
        /// The peer ended the session with an `error` message.
        public static let peerError = Code("peerError")
        /// The connection ended in the middle of a frame.
        public static let truncated = Code("truncated")
        /// The connection closed before the session finished.
        public static let closed = Code("closed")
        /// An operation is too large to travel in a batch.
        public static let operationTooLarge = Code("operationTooLarge")
        /// The session has used all its frame counters.
        public static let counterExhausted = Code("counterExhausted")
        /// A timeout of the transport (SPEC.md §15.7).
        public static let timedOut = Code("timedOut")
        /// This side ended the session (a store error while applying a batch, a shutdown).
        public static let local = Code("local")
        /// The store's sync key was replaced during the session (SPEC.md §15.1).
        public static let keyReplaced = Code("keyReplaced")

        public var description: String { name }
    }

    public let code: Code
    /// One line that says what went wrong, for a log or a terminal.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }

    static let wrongKeyMessage = "the peer does not hold this store's sync key"

    static func versionMismatch(peer: UInt16) -> PeerFailure {
        let remedy = peer > PeerProtocol.version ? "upgrade Concord on this side" : "upgrade Concord on the peer"
        return PeerFailure(.versionMismatch, "the peer speaks protocol version \(peer) and this build speaks \(PeerProtocol.version); \(remedy)")
    }

    static func violation(_ what: String) -> PeerFailure {
        PeerFailure(.protocolViolation, "the peer broke the protocol: \(what)")
    }
}
