import ConcordCore
import Foundation
import Testing
@testable import ConcordPeer

/// Mutation fuzzing of what a peer receives (issue 6, "Hostile bytes"): a genuine client's byte
/// stream, flipped, overwritten, cut, stretched and spliced, fed to a server session in pieces of
/// every size. No input crashes or hangs it, every session ends, and nothing but the genuine
/// client's own operations is ever applied: a forged or damaged frame fails authentication.
///
/// `CONCORD_FUZZ_INPUTS` sets the number of inputs (default 2,000; `scripts/fuzz` runs more) and
/// `CONCORD_FUZZ_SEED` the seed, which every run prints.
@Suite struct PeerFuzzTests {
    static let inputs = ProcessInfo.processInfo.environment["CONCORD_FUZZ_INPUTS"].flatMap(Int.init) ?? 2_000
    static let seed: UInt64 = {
        let text = ProcessInfo.processInfo.environment["CONCORD_FUZZ_SEED"] ?? ""
        return (text.hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text)) ?? UInt64.random(in: 1...UInt64.max)
    }()

    /// A genuine session: what the client sent, the operations it holds and the server's.
    static func recordedSession() -> (stream: [UInt8], clientOperations: [Op], serverOperations: [Op]) {
        let clientOperations = operations(by: replicaA, seqs: 1...120, text: "fuzz")
        let serverOperations = operations(by: replicaB, seqs: 1...40)
        var client = TestPeer(role: .client, replica: replicaA, operations: clientOperations, random: seeded(10))
        var server = TestPeer(role: .server, replica: replicaB, operations: serverOperations, random: seeded(20))
        client.chunk = 25
        run(&client, &server)
        return (client.sent, clientOperations, serverOperations)
    }

    /// A server session fed `bytes` frame by frame (as a client that waits for the server's
    /// answers would send them), each frame in pieces of `chunk`, then the connection closed.
    /// Frame boundaries come from the length prefixes as they stand; the rest goes in one piece.
    static func serve(_ bytes: [UInt8], chunk: Int, serverOperations: [Op]) -> TestPeer {
        var server = TestPeer(role: .server, replica: replicaB, operations: serverOperations, random: seeded(20))
        server.start()
        var offset = 0
        while offset < bytes.count, !server.hasEnded {
            var end = bytes.count
            if bytes.count - offset >= 4 {
                let length = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
                end = min(bytes.count, offset + 4 + length)
            }
            server.receive(Array(bytes[offset..<end]), chunk: chunk)
            offset = end
        }
        if !server.hasEnded { server.perform(server.session.connectionClosed()) }
        return server
    }

    static func mutate(_ input: [UInt8], _ rng: inout SplitMix64) -> [UInt8] {
        var bytes = input
        func position() -> Int { bytes.isEmpty ? 0 : Int(rng.next() % UInt64(bytes.count)) }
        for _ in 0..<(1 + Int(rng.next() % 3)) {
            switch rng.next() % 8 {
            case 0 where !bytes.isEmpty:
                bytes[position()] ^= 1 << UInt8(rng.next() % 8)
            case 1 where !bytes.isEmpty:
                bytes[position()] = UInt8(truncatingIfNeeded: rng.next())
            case 2:
                let count = 1 + Int(rng.next() % 8)
                bytes.insert(contentsOf: (0..<count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }, at: position())
            case 3 where !bytes.isEmpty:
                let start = position()
                bytes.removeSubrange(start..<min(bytes.count, start + 1 + Int(rng.next() % 64)))
            case 4:
                bytes.removeLast(bytes.isEmpty ? 0 : Int(rng.next() % UInt64(bytes.count)))
            case 5 where !bytes.isEmpty:
                let start = position()
                let range = start..<min(bytes.count, start + 1 + Int(rng.next() % 256))
                bytes.insert(contentsOf: bytes[range], at: position())
            case 6 where bytes.count >= 4:
                // A length field claiming up to 4 GB.
                let start = position() & ~3
                for offset in 0..<min(4, bytes.count - start) { bytes[start + offset] = 0xFF }
            default:
                let interesting: [UInt8] = [0x00, 0x01, 0x7F, 0x80, 0xFF]
                if !bytes.isEmpty { bytes[position()] = interesting[Int(rng.next() % 5)] }
            }
        }
        return bytes
    }

    @Test func mutatedStreamsNeverCrashAndApplyOnlyGenuineOperations() throws {
        print("PeerFuzzTests: \(Self.inputs) inputs, seed \(Self.seed) (CONCORD_FUZZ_SEED=\(Self.seed) replays)")
        let (stream, clientOperations, serverOperations) = Self.recordedSession()
        let genuine = Set(clientOperations)

        // The stream as recorded is a whole, successful session.
        let control = Self.serve(stream, chunk: .max, serverOperations: serverOperations)
        try #require(control.finished != nil, "the recorded stream replays")
        #expect(Set(control.appliedBatches.joined()) == genuine)

        var rng = SplitMix64(seed: Self.seed)
        let chunks = [1, 3, 17, 64, 1000, Int.max]
        var outcomes: [String: Int] = [:]
        for index in 0..<Self.inputs {
            let mutated = Self.mutate(stream, &rng)
            let chunk = chunks[Int(rng.next() % UInt64(chunks.count))]
            let server = Self.serve(mutated, chunk: chunk, serverOperations: serverOperations)
            let forged = server.appliedBatches.joined().filter { !genuine.contains($0) }
            guard server.hasEnded, forged.isEmpty else {
                let file = FileManager.default.temporaryDirectory.appendingPathComponent("peer-fuzz-\(Self.seed)-\(index).bin")
                try Data(mutated).write(to: file)
                Issue.record("input \(index) (seed \(Self.seed), chunk \(chunk), saved at \(file.path)): ended \(server.hasEnded), forged \(forged.count)")
                return
            }
            outcomes[server.failure.map { "\($0.code)" } ?? "finished", default: 0] += 1
        }
        // The summary line scripts/fuzz adds up.
        print("fuzz peer: \(Self.inputs) inputs in one session each, seed \(Self.seed), 0 findings; outcomes \(outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))")
    }

    /// Random bytes, and random lengths, to the frame decoder alone: frames over the limit are
    /// refused before anything is buffered for them, and nothing else goes wrong.
    @Test func theFrameDecoderTakesAnyBytes() throws {
        var rng = SplitMix64(seed: Self.seed &+ 1)
        for _ in 0..<Self.inputs {
            var decoder = FrameDecoder(maxPayloadBytes: 1 << 12)
            var input: [UInt8] = []
            for _ in 0..<(1 + Int(rng.next() % 6)) {
                let length = UInt32(rng.next() % 3 == 0 ? rng.next() % (1 << 32) : rng.next() % (1 << 13))
                input += withUnsafeBytes(of: length.bigEndian, Array.init)
                input += (0..<Int(rng.next() % 64)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            }
            var offset = 0
            decoding: while offset < input.count {
                let piece = min(input.count - offset, 1 + Int(rng.next() % 40))
                decoder.append(input[offset..<offset + piece])
                offset += piece
                do {
                    while let payload = try decoder.next() { #expect(payload.count <= 1 << 12) }
                } catch {
                    break decoding
                }
                #expect(decoder.bufferedByteCount <= (1 << 12) + 4 + 40)
            }
        }
    }
}
