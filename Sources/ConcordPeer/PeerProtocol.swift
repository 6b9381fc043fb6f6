/// Constants of the peer protocol (SPEC.md §15).
package enum PeerProtocol {
    /// The first 8 bytes of every handshake frame: `CNCDPEER`.
    package static let magic: [UInt8] = Array("CNCDPEER".utf8)
    /// The protocol version of a one-shot session, which every build speaks.
    package static let version: UInt16 = 1
    /// The protocol version of a live session (SPEC.md §15.10).
    package static let liveVersion: UInt16 = 2
    /// Versions 3 and 4 are versions 1 and 2 whose assigns carry their predecessors (SPEC.md
    /// §15.5); versions 5 and 6 are 3 and 4 whose batches may carry purges and elided operations
    /// (§15.10); versions 7 and 8 are 5 and 6 whose batches may carry compacted seqs (§5.8,
    /// §15.10); versions 9 and 10 are 7 and 8 whose `versions` message says where the side knows
    /// removes were dropped as stable (§5.8). The highest this build speaks is 10.
    package static let highestVersion: UInt16 = 10

    /// Whether a session of `version` has a live phase: 2 and 4.
    package static func isLive(_ version: UInt16) -> Bool { version % 2 == 0 }

    /// Whether the assigns of a session of `version` carry their predecessors: 3 and 4.
    package static func carriesPredecessors(_ version: UInt16) -> Bool { version >= 3 }

    /// Whether a session of `version` may carry purges and elided operations: 5 and up.
    package static func carriesPurges(_ version: UInt16) -> Bool { version >= 5 }

    /// Whether the batches of a session of `version` may carry compacted seqs: 7 and up.
    package static func carriesCompaction(_ version: UInt16) -> Bool { version >= 7 }

    /// Whether the `versions` message of a session of `version` says where removes were dropped
    /// as stable: 9 and 10.
    package static func carriesDroppedRemoves(_ version: UInt16) -> Bool { version >= lowestWithDroppedRemoves }

    /// The oldest version whose `versions` message says where removes were dropped as stable.
    package static let lowestWithDroppedRemoves: UInt16 = 9

    /// The version a client proposes: the highest up to `highest` that is live when it wants a live
    /// session and one-shot otherwise, or 1 (one-shot) when there is no live one.
    package static func proposal(live: Bool, upTo highest: UInt16) -> UInt16 {
        var proposed = min(live ? 10 : 9, highest)
        if isLive(proposed) != live { proposed -= 1 }
        return max(proposed, version)
    }
    /// A side writes no further push while the operations it pushed and the peer has not
    /// acknowledged exceed this many, or `maxUnacknowledgedPushBytes` raw (SPEC.md §15.10).
    package static let maxUnacknowledgedPushOperations = 131_072
    package static let maxUnacknowledgedPushBytes = 8 << 20
    /// In the live phase, a side that has written nothing for this long sends `ping`.
    package static let heartbeatInterval: Duration = .seconds(5)
    /// In the live phase, a side ends the session once its peer has sent nothing for this long
    /// (while it reads), or has taken none of what waits to be written.
    package static let liveSilenceTimeout: Duration = .seconds(15)
    /// The longest frame payload a reader accepts once the handshake is complete: 4 MiB.
    package static let maxFrameBytes = 4 << 20
    /// The longest frame payload a reader accepts during the handshake.
    package static let maxHandshakeFrameBytes = 256
    /// The most operations a batch may hold.
    package static let maxBatchOperations = 16_384
    /// The largest raw (decompressed) batch payload: 4 MiB.
    package static let maxBatchBytes = 4 << 20
    /// A sender closes a batch once its raw payload reaches this size.
    package static let targetBatchBytes = 1 << 20
    /// The longest reason an `error` message carries, in UTF-8 bytes.
    package static let maxErrorReasonBytes = 1_024
    /// How long a transport lets a connection take to complete the handshake.
    package static let handshakeTimeout: Duration = .seconds(10)
    /// How long a transport lets a session go without receiving or sending a byte.
    package static let idleTimeout: Duration = .seconds(60)
}

/// The framing of both directions of a connection (SPEC.md §15.2): a `u32` big-endian length,
/// then that many bytes of payload.
package enum Frame {
    /// The length prefix's size.
    package static let headerBytes = 4

    /// The frame that carries `payload`: its length, then the payload.
    package static func encode(_ payload: some Collection<UInt8>) -> [UInt8] {
        precondition(payload.count <= UInt32.max, "a frame payload of \(payload.count) bytes")
        let length = UInt32(payload.count)
        var frame: [UInt8] = [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
        frame.reserveCapacity(headerBytes + payload.count)
        frame.append(contentsOf: payload)
        return frame
    }
}

/// Why a frame could not be read.
package enum FrameError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A frame's length prefix declares more than the decoder's limit.
    case tooLarge(length: Int, limit: Int)

    package var description: String {
        switch self {
        case let .tooLarge(length, limit): "a frame of \(length) bytes is over the \(limit)-byte limit"
        }
    }
}

/// Cuts a byte stream into frames (SPEC.md §15.2), however the stream arrives: one byte at a time,
/// or many frames at once.
///
/// ```swift
/// var decoder = FrameDecoder()
/// decoder.append(bytesFromTheSocket)
/// while let payload = try decoder.next() { handle(payload) }
/// ```
///
/// A length over `maxPayloadBytes` is refused by `next()` as soon as the 4 length bytes are
/// there, before anything is allocated for the payload. The decoder holds only the bytes given
/// to it that no returned frame has consumed yet.
package struct FrameDecoder: Sendable {
    /// The longest payload `next()` accepts. It may be changed between frames (the peer protocol
    /// raises it after the handshake); it applies to the next length read.
    package var maxPayloadBytes: Int
    private var buffer: [UInt8] = []
    private var start = 0

    package init(maxPayloadBytes: Int = PeerProtocol.maxFrameBytes) {
        self.maxPayloadBytes = maxPayloadBytes
    }

    /// Bytes received and not yet returned as part of a frame.
    package var bufferedByteCount: Int { buffer.count - start }

    /// Whether the stream is cut inside a frame: bytes of an incomplete frame are waiting. A stream
    /// that ends here is truncated.
    package var isInsideFrame: Bool { bufferedByteCount > 0 }

    /// Adds bytes received from the stream.
    /// - Complexity: amortized O(*n*) in the bytes added.
    package mutating func append(_ bytes: some Collection<UInt8>) {
        if start > 0, start >= buffer.count / 2 {
            buffer.removeSubrange(..<start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole frame's payload, or `nil` until more bytes arrive.
    /// - Throws: `FrameError.tooLarge` when the next frame declares more than `maxPayloadBytes`;
    ///   the decoder then stays at that frame, and the stream cannot be read further.
    package mutating func next() throws(FrameError) -> [UInt8]? {
        guard bufferedByteCount >= Frame.headerBytes else { return nil }
        let length = buffer[start..<start + Frame.headerBytes].reduce(0) { $0 << 8 | Int($1) }
        guard length <= maxPayloadBytes else { throw .tooLarge(length: length, limit: maxPayloadBytes) }
        guard bufferedByteCount >= Frame.headerBytes + length else { return nil }
        let payloadStart = start + Frame.headerBytes
        let payload = Array(buffer[payloadStart..<payloadStart + length])
        start = payloadStart + length
        if start == buffer.count {
            // Keep a small buffer for the next frames; give a large one back.
            buffer.removeAll(keepingCapacity: buffer.capacity <= 1 << 16)
            start = 0
        }
        return payload
    }
}
