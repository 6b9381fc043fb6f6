import ConcordCore
import ConcordWire
import Foundation

/// The messages of the encrypted phase (SPEC.md §15.5), and those of a live session's live phase
/// (§15.10).
enum PeerMessage: Hashable {
    enum Kind: UInt8 {
        case versions = 1
        case batch = 2
        case done = 3
        case error = 4
        case ack = 5
        case push = 6
        case pushAck = 7
        case ping = 8
        case pong = 9

        /// "a versions message", "an error message", …
        var phrase: String {
            switch self {
            case .versions: "a versions message"
            case .batch: "a batch message"
            case .done: "a done message"
            case .error: "an error message"
            case .ack: "an ack message"
            case .push: "a push message"
            case .pushAck: "a pushAck message"
            case .ping: "a ping message"
            case .pong: "a pong message"
            }
        }

        /// Whether it belongs to the live phase.
        var isLive: Bool { rawValue >= Kind.push.rawValue }
    }

    /// The side's replica, its version vector, and (versions 9 and 10) where it knows removes
    /// were dropped as stable (SPEC.md §5.8, §15.5); empty in older versions.
    case versions(ReplicaID, VersionVector, dropped: VersionVector = VersionVector())
    /// A batch's operations, and the compacted seqs it carries (SPEC.md §5.8, §15.10).
    case batch([Op], compacted: SeqRanges)
    case done
    case error(String)
    case ack(UInt64)
    case push([Op])
    case pushAck(UInt64)
    case ping(UInt64)
    case pong(UInt64)

    /// A versions message; `dropped` is written only when given (versions 9 and 10).
    static func encodeVersions(replica: ReplicaID, versions: VersionVector, dropped: VersionVector? = nil) -> [UInt8] {
        var writer = ByteWriter()
        writer.byte(Kind.versions.rawValue)
        writer.identifier(replica)
        writer.versionVector(versions)
        if let dropped { writer.versionVector(dropped) }
        return writer.bytes
    }

    /// A batch message (or a push, which has the same body) around a raw operations payload
    /// (SPEC.md §13).
    static func encodeBatch(raw: [UInt8], kind: Kind = .batch) -> [UInt8] {
        precondition(kind == .batch || kind == .push, "\(kind.phrase) carries no operations")
        var writer = ByteWriter()
        writer.byte(kind.rawValue)
        writer.varint(UInt64(raw.count))
        writer.bytes(Zstd.compress(raw))
        return writer.bytes
    }

    static let doneMessage: [UInt8] = [Kind.done.rawValue]

    static func encodeAck(_ operations: Int) -> [UInt8] {
        encodeCount(.ack, UInt64(operations))
    }

    /// An `ack`, `pushAck`, `ping` or `pong`: the type, then one varint.
    static func encodeCount(_ kind: Kind, _ value: UInt64) -> [UInt8] {
        var writer = ByteWriter()
        writer.byte(kind.rawValue)
        writer.varint(value)
        return writer.bytes
    }

    static func encodeError(_ reason: String) -> [UInt8] {
        var writer = ByteWriter()
        writer.byte(Kind.error.rawValue)
        writer.string(truncated(reason, toUTF8Bytes: PeerProtocol.maxErrorReasonBytes))
        return writer.bytes
    }

    /// The longest prefix of `text` (whole characters) that fits in `limit` UTF-8 bytes.
    static func truncated(_ text: String, toUTF8Bytes limit: Int) -> String {
        guard text.utf8.count > limit else { return text }
        var result = ""
        var count = 0
        for character in text {
            let size = character.utf8.count
            guard count + size <= limit else { break }
            result.append(character)
            count += size
        }
        return result
    }

    /// The type of a message, or `nil` for an empty message.
    static func kind(of message: [UInt8]) -> UInt8? { message.first }

    /// Whether a message carries operations (a batch or a push), by its type byte (before it is
    /// decoded).
    static func isBatch(_ message: [UInt8]) -> Bool {
        kind(of: message) == Kind.batch.rawValue || kind(of: message) == Kind.push.rawValue
    }

    /// The raw length a batch or push message declares (before it is checked: `decode` checks
    /// it), or nil if the message is neither or too short to declare one.
    static func declaredRawLength(of message: [UInt8]) -> Int? {
        guard isBatch(message) else { return nil }
        var reader = ByteReader(message, offset: 1)
        return (try? reader.varint()).map { Int(clamping: $0) }
    }

    /// Decodes a whole message, checking every rule of SPEC.md §15.5 and §13.
    static func decode(_ message: [UInt8], version: UInt16 = PeerProtocol.version) throws(Malformed) -> PeerMessage {
        guard let type = message.first else { throw Malformed("an empty message") }
        guard let kind = Kind(rawValue: type) else { throw Malformed("a message of unknown type \(type)") }
        var reader = ByteReader(message, offset: 1)
        do {
            switch kind {
            case .versions:
                let replica: ReplicaID = try reader.identifier()
                let versions = try reader.versionVector()
                let dropped = PeerProtocol.carriesDroppedRemoves(version) ? try reader.versionVector() : VersionVector()
                guard reader.isAtEnd else { throw DecodeError.malformed("bytes after the version vector") }
                return .versions(replica, versions, dropped: dropped)
            case .batch, .push:
                let rawLength = try reader.varint()
                guard rawLength >= 1, rawLength <= UInt64(PeerProtocol.maxBatchBytes) else {
                    throw DecodeError.malformed("a batch declares \(rawLength) raw bytes (the limit is \(PeerProtocol.maxBatchBytes))")
                }
                let raw: [UInt8]
                do {
                    raw = try Zstd.decompress(message[reader.offset...], size: Int(rawLength))
                } catch {
                    guard case .corrupt(let why) = error else { throw DecodeError.malformed("\(error)") }
                    throw DecodeError.malformed(why.replacingOccurrences(of: "a block", with: "a batch"))
                }
                var operations: [Op] = []
                var cursor = try OperationsBlock.Cursor(raw, maxOperations: PeerProtocol.maxBatchOperations)
                while let operation = try cursor.next() { operations.append(operation) }
                // A push's compacted seqs are not taken (SPEC.md §15.10).
                return kind == .batch ? .batch(operations, compacted: SeqRanges(cursor.compacted)) : .push(operations)
            case .done:
                guard reader.isAtEnd else { throw DecodeError.malformed("bytes after done") }
                return .done
            case .error:
                let reason = try reader.string(maxBytes: PeerProtocol.maxErrorReasonBytes)
                guard reader.isAtEnd else { throw DecodeError.malformed("bytes after the error's reason") }
                return .error(reason)
            case .ack, .pushAck, .ping, .pong:
                let value = try reader.varint()
                guard reader.isAtEnd else { throw DecodeError.malformed(kind == .ack || kind == .pushAck ? "bytes after the count" : "bytes after the nonce") }
                switch kind {
                case .ack: return .ack(value)
                case .pushAck: return .pushAck(value)
                case .ping: return .ping(value)
                default: return .pong(value)
                }
            }
        } catch let error as DecodeError {
            throw Malformed("\(kind.phrase): \(error.shortDescription)")
        } catch {
            throw Malformed("\(kind.phrase): \(error)")
        }
    }

    /// The reason of a peer's `error`, safe to print on a terminal: control and format characters
    /// (escape sequences, bidirectional overrides) replaced, at most 200 characters.
    static func sanitized(_ reason: String) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in reason.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse, .unassigned:
                scalars.append("\u{FFFD}")
            default:
                scalars.append(scalar)
            }
        }
        let text = String(scalars)
        return text.count > 200 ? String(text.prefix(200)) + "…" : text
    }
}

/// What is wrong with a message, in a few words.
struct Malformed: Error {
    let what: String
    init(_ what: String) { self.what = what }
}

extension DecodeError {
    /// The description without the generic preamble.
    var shortDescription: String {
        switch self {
        case .truncated: "it ends early"
        case .malformed(let why): why
        }
    }
}
