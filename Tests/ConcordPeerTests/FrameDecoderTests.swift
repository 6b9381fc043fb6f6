import Testing
@testable import ConcordPeer

/// Framing (SPEC.md §15.2): the same frames however the stream is cut, and a length over the
/// limit refused before anything is allocated for it.
@Suite struct FrameDecoderTests {
    static let payloads: [[UInt8]] = [
        [],
        [0x42],
        Array(0..<255),
        [UInt8](repeating: 0xEE, count: 70_000),
        [0, 0, 0, 0],
        Array("CNCDPEER".utf8),
    ]

    static var stream: [UInt8] { payloads.flatMap { Frame.encode($0) } }

    /// Feeds `stream` in pieces of `chunk` bytes, taking every frame as soon as it is whole.
    static func decode(_ stream: [UInt8], chunk: Int) throws -> (frames: [[UInt8]], decoder: FrameDecoder) {
        var decoder = FrameDecoder()
        var frames: [[UInt8]] = []
        var start = 0
        while start < stream.count {
            let end = min(start + chunk, stream.count)
            decoder.append(stream[start..<end])
            while let frame = try decoder.next() { frames.append(frame) }
            start = end
        }
        return (frames, decoder)
    }

    @Test func theEncodingIsALengthThenThePayload() {
        #expect(Frame.encode([]) == [0, 0, 0, 0])
        #expect(Frame.encode([7, 8, 9]) == [0, 0, 0, 3, 7, 8, 9])
        #expect(Frame.encode([UInt8](repeating: 1, count: 0x01_0203))[..<4] == [0, 1, 2, 3])
    }

    @Test(arguments: [1, 2, 3, 4, 5, 7, 64, 4096, 65_537, Int.max])
    func framesAreTheSameHoweverTheStreamIsCut(chunk: Int) throws {
        let (frames, decoder) = try Self.decode(Self.stream, chunk: chunk)
        #expect(frames == Self.payloads)
        #expect(decoder.bufferedByteCount == 0)
        #expect(!decoder.isInsideFrame)
    }

    @Test func aStreamCutInsideAFrameLeavesBytesWaiting() throws {
        let stream = Self.stream
        for cut in [1, 3, 5, 7, 10, stream.count - 1] {
            let (frames, decoder) = try Self.decode(Array(stream[..<cut]), chunk: .max)
            #expect(decoder.isInsideFrame, "cut at \(cut)")
            #expect(frames == Array(Self.payloads.prefix(frames.count)))
        }
        // A cut between frames is not inside one.
        let (_, decoder) = try Self.decode(Frame.encode([1]) + Frame.encode([2, 3]), chunk: 1)
        #expect(!decoder.isInsideFrame)
    }

    /// The length is refused from its 4 bytes alone: no payload byte is needed, and none is
    /// buffered or allocated.
    @Test func aLengthOverTheLimitIsRefusedFromTheHeaderAlone() {
        var decoder = FrameDecoder()
        decoder.append([0x00, 0x40, 0x00, 0x01])  // 4 MiB + 1
        #expect(throws: FrameError.tooLarge(length: 4_194_305, limit: 4_194_304)) { try decoder.next() }
        #expect(decoder.bufferedByteCount == 4)
        // It stays refused.
        #expect(throws: FrameError.self) { try decoder.next() }

        var huge = FrameDecoder()
        huge.append([0xFF, 0xFF, 0xFF, 0xFF])
        #expect(throws: FrameError.tooLarge(length: 4_294_967_295, limit: 4_194_304)) { try huge.next() }
    }

    @Test func aLengthAtTheLimitIsAccepted() throws {
        var decoder = FrameDecoder()
        decoder.append([0x00, 0x40, 0x00, 0x00])
        #expect(try decoder.next() == nil)
        decoder.append([UInt8](repeating: 9, count: 4 << 20))
        #expect(try decoder.next()?.count == 4 << 20)
        #expect(PeerProtocol.maxFrameBytes == 4_194_304)
    }

    @Test func theLimitAppliesToTheNextLengthRead() throws {
        var decoder = FrameDecoder(maxPayloadBytes: 256)
        decoder.append(Frame.encode([UInt8](repeating: 1, count: 256)) + Frame.encode([UInt8](repeating: 2, count: 300)))
        #expect(try decoder.next()?.count == 256)
        #expect(throws: FrameError.tooLarge(length: 300, limit: 256)) { try decoder.next() }
        decoder.maxPayloadBytes = 4 << 20
        #expect(try decoder.next()?.count == 300)
    }

    @Test func manyFramesInOneAppendComeOutOneByOne() throws {
        var decoder = FrameDecoder()
        let payloads = (0..<1000).map { [UInt8](repeating: UInt8(truncatingIfNeeded: $0), count: $0 % 17) }
        decoder.append(payloads.flatMap { Frame.encode($0) })
        var frames: [[UInt8]] = []
        while let frame = try decoder.next() { frames.append(frame) }
        #expect(frames == payloads)
        #expect(decoder.bufferedByteCount == 0)
    }
}
