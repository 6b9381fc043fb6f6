import CZstd

/// zstd compression of a block through the system libzstd: bundles' operations blocks (SPEC.md
/// §13) and peer batches (§15.6).
package enum Zstd {
    /// The level bundles are written at (zstd's default).
    static let level: Int32 = 3
    /// The first bytes of a zstd frame (0xFD2FB528, little-endian).
    static let frameMagic: [UInt8] = [0x28, 0xB5, 0x2F, 0xFD]

    /// One zstd frame holding `input`, at zstd's default level.
    package static func compress(_ input: [UInt8]) -> [UInt8] {
        let bound = ZSTD_compressBound(input.count)
        var output = [UInt8](repeating: 0, count: bound)
        let written = input.withUnsafeBytes { source in
            output.withUnsafeMutableBytes { destination in
                ZSTD_compress(destination.baseAddress, bound, source.baseAddress, input.count, level)
            }
        }
        // Compression into a buffer of ZSTD_compressBound bytes cannot fail.
        precondition(ZSTD_isError(written) == 0, "zstd: \(String(cString: ZSTD_getErrorName(written)))")
        output.removeSubrange(written...)
        return output
    }

    /// One zstd frame holding `parts` one after the other, at zstd's default level, compressed as
    /// they are rather than joined first: a block written in columns is not copied whole once
    /// more. The frame records its content size, as `compress(_:)`'s does.
    package static func compress(parts: [[UInt8]]) -> [UInt8] {
        guard let context = ZSTD_createCCtx() else { fatalError("zstd: cannot create a compression context") }
        defer { ZSTD_freeCCtx(context) }
        func check(_ result: Int) {
            precondition(ZSTD_isError(result) == 0, "zstd: \(String(cString: ZSTD_getErrorName(result)))")
        }
        check(ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, level))
        check(ZSTD_CCtx_setPledgedSrcSize(context, UInt64(parts.reduce(0) { $0 + $1.count })))
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: ZSTD_CStreamOutSize())
        for (index, part) in parts.enumerated() where !part.isEmpty || index == parts.count - 1 {
            let directive = index == parts.count - 1 ? ZSTD_e_end : ZSTD_e_continue
            part.withUnsafeBytes { source in
                var input = ZSTD_inBuffer(src: source.baseAddress, size: source.count, pos: 0)
                var pending = 0
                repeat {
                    chunk.withUnsafeMutableBytes { destination in
                        var out = ZSTD_outBuffer(dst: destination.baseAddress, size: destination.count, pos: 0)
                        pending = ZSTD_compressStream2(context, &out, &input, directive)
                        check(pending)
                        output.append(contentsOf: destination[..<out.pos])
                    }
                    // Ending, zstd says how much it still holds; continuing, it takes all the input.
                } while directive == ZSTD_e_end ? pending != 0 : input.pos < input.size
            }
        }
        return output
    }

    /// Decompresses one frame that must expand to exactly `size` bytes. Anything else (several
    /// frames, a skippable frame, bytes after the frame, another size) is refused; at most `size`
    /// bytes are allocated, so the caller bounds `size` first.
    package static func decompress(_ input: ArraySlice<UInt8>, size: Int) throws(BundleError) -> [UInt8] {
        var output: [UInt8] = []
        try decompress(input, size: size, into: &output)
        return output
    }

    /// `decompress`, into `output`'s storage (its bytes replaced): a reader that decompresses block
    /// after block into one buffer allocates, and has pages faulted in, once.
    package static func decompress(_ input: ArraySlice<UInt8>, size: Int, into output: inout [UInt8]) throws(BundleError) {
        // Exactly one regular frame: zstd itself would also accept several frames back to back,
        // or skippable frames.
        guard input.starts(with: frameMagic) else { throw .corrupt("a block is not one zstd frame") }
        let frameSize = input.withUnsafeBytes { ZSTD_findFrameCompressedSize($0.baseAddress, input.count) }
        guard ZSTD_isError(frameSize) == 0, frameSize == input.count else {
            throw .corrupt("a block is not exactly one zstd frame")
        }
        // Resized in place (the bytes are overwritten whole).
        if output.count > size {
            output.removeSubrange(size...)
        } else if output.count < size {
            output += [UInt8](repeating: 0, count: size - output.count)
        }
        let result = input.withUnsafeBytes { source in
            output.withUnsafeMutableBytes { destination in
                ZSTD_decompress(destination.baseAddress, size, source.baseAddress, input.count)
            }
        }
        guard ZSTD_isError(result) == 0 else {
            throw .corrupt("a block does not decompress (\(String(cString: ZSTD_getErrorName(result))))")
        }
        guard result == size else { throw .corrupt("a block decompresses to \(result) bytes, not the \(size) it declares") }
    }
}
