import ConcordCore

/// The errors a peer session ends with (SPEC.md §15.8), each one line that says what happened, to
/// show as it is.
extension ConcordError {
    static let wrongKeyMessage = "the peer does not hold this store's sync key"

    static func versionMismatch(peer: UInt16) -> ConcordError {
        let remedy = peer > PeerProtocol.highestVersion ? "upgrade Concord on this side" : "upgrade Concord on the peer"
        return ConcordError(
            .versionMismatch,
            "the peer speaks protocol version \(peer) and this build speaks versions \(PeerProtocol.version) to \(PeerProtocol.highestVersion); \(remedy)",
            cause: PeerVersionMismatch(peerVersion: peer))
    }

    /// A session of a version older than purges (SPEC.md §15.10) that would send one: the peer's
    /// build cannot read it, and sending the records without it would bring their content back.
    /// No `PeerVersionMismatch` cause: the version was settled, and trying it again at once would
    /// end the same way (a live client tries again after its backoff, once the peer may be upgraded).
    static func cannotSendPurges(peer: UInt16) -> ConcordError {
        ConcordError(
            .versionMismatch,
            "the peer speaks protocol version \(peer), which cannot carry the purges this store holds; upgrade Concord on the peer")
    }

    /// The version a peer named when it refused this side's, or spoke another (the cause of a
    /// `versionMismatch`): a client tries again once with the versions up to it (SPEC.md §15.10).
    package struct PeerVersionMismatch: Error, Hashable {
        package let peerVersion: UInt16
    }

    static func violation(_ what: String) -> ConcordError {
        ConcordError(.protocolViolation, "the peer broke the protocol: \(what)")
    }
}
