import ConcordCore

/// Constants of the bundle format (SPEC.md §13).
package enum BundleFormat {
    /// `\x89 C N C D \r \n \x1A`: not text, and damaged by any newline or 8-bit mangling.
    package static let magic: [UInt8] = [0x89, 0x43, 0x4E, 0x43, 0x44, 0x0D, 0x0A, 0x1A]
    /// The newest format version this build reads and writes: 7, whose operations blocks hold
    /// their entries' parts in columns and name by number a record that a block before them listed
    /// (SPEC.md §13). It reads formats 1 to 6 too: format 6's blocks each name their records
    /// afresh; those of formats 1 to 5 hold runs of rows; format 5's manifest says where its
    /// publisher knows removes were dropped as stable, format 4's runs may hold compacted seqs,
    /// format 3's operations may be purges and elided operations, format 2's assigns may carry
    /// their predecessors, format 1's carry none.
    package static let version: UInt8 = 7
    /// The first format whose blocks name by number the records that blocks before them listed.
    package static let withRecordsNamedPerBundle: UInt8 = 7
    /// The first format whose operations blocks hold columns.
    package static let withColumns: UInt8 = 6
    /// The first format whose manifest says where removes were dropped as stable, and the last
    /// whose operations blocks hold rows.
    package static let withDroppedRemoves: UInt8 = 5
    /// The format of a bundle that may hold compacted seqs, whose publisher knows of no remove
    /// dropped as stable.
    package static let withoutDroppedRemoves: UInt8 = 4
    /// The format of a bundle that may hold purges and elided operations, and no compacted seq.
    package static let withoutCompaction: UInt8 = 3
    /// The oldest format this build writes: its runs hold no purge, no elided operation and no
    /// compacted seq (SPEC.md §13).
    package static let withoutPurges: UInt8 = 2
    /// The longest block, stored or decompressed, a reader accepts: 16 MiB.
    package static let maxBlockBytes = 16 << 20

    /// How a block of format `format` lays out its entries.
    package static func layout(_ format: UInt8) -> OperationsBlock.Layout {
        format >= withColumns ? .columns : .rows
    }

    /// Which records a block of format `format` names by number (in columns).
    package static func reach(_ format: UInt8) -> OperationColumns.Reach {
        format >= withRecordsNamedPerBundle ? .bundle : .block
    }

    /// A writer closes an operations block after the entry that brings its bytes
    /// (`OperationsBlock.Encoder.blockBytes`) to this many or more (SPEC.md §13, "Canonical
    /// order"). Columns compress better the more they hold: their blocks are larger, yet with an
    /// operation under 1 MiB last (larger ones go alone) well under `maxBlockBytes`.
    package static func targetBlockBytes(_ format: UInt8) -> Int {
        layout(format) == .rows ? 1 << 20 : 7 << 20
    }

    static let headerBytes = 10
    static let blockHeaderBytes = 14

    enum BlockType: UInt8 {
        case manifest = 1
        case operations = 2
        case end = 3
    }

    static let compressedFlag: UInt8 = 0x01
}

/// What a bundle says about itself, before its operations.
public struct BundleManifest: Hashable, Sendable {
    /// The replica that wrote the bundle.
    public var publisher: ReplicaID
    /// When it was written (milliseconds since the epoch, the publisher's wall clock).
    public var createdMillis: UInt64
    /// The version vector the bundle was cut from: it holds the publisher's operations not covered by it.
    public var base: VersionVector
    /// The publisher's version vector when it wrote the bundle.
    public var top: VersionVector
    /// Where the publisher knew removes were dropped as stable when it wrote the bundle (SPEC.md
    /// §5.8): empty before format 5.
    public var droppedStableThrough: VersionVector

    package init(
        publisher: ReplicaID, createdMillis: UInt64, base: VersionVector, top: VersionVector,
        droppedStableThrough: VersionVector = VersionVector()
    ) {
        self.publisher = publisher
        self.createdMillis = createdMillis
        self.base = base
        self.top = top
        self.droppedStableThrough = droppedStableThrough
    }

    /// How many operations lie between `base` and `top`: at most what the bundle holds, if its
    /// publisher's store had no gaps. Only an estimate (the manifest is the sender's word), for
    /// showing or planning, never for what to apply.
    package var operationsBetweenBaseAndTop: UInt64 {
        // Saturating: a hostile manifest's sum must not wrap round to a small one.
        top.sorted.reduce(0) { total, entry in
            let (sum, overflow) = total.addingReportingOverflow(entry.seq - min(entry.seq, base[entry.replica]))
            return overflow ? .max : sum
        }
    }
}

/// What a whole bundle held.
public struct BundleSummary: Hashable, Sendable {
    /// What the bundle says about itself.
    public var manifest: BundleManifest
    /// How many operations it held.
    public var operations: Int
    /// The bundle's size in bytes.
    public var bytes: Int
    /// The ids of its operations, and its compacted seqs.
    package var holds: SeqRanges
    /// Its compacted seqs (SPEC.md §5.8): held by its publisher without their operations.
    package var compacted = SeqRanges()
    /// The SHA-256 of the file's bytes, when the bundle was written to or read from a file.
    public var sha256: [UInt8]?
}

/// Why a bundle was refused. Nothing of a refused bundle is ever applied.
package enum BundleError: Error, Hashable, CustomStringConvertible {
    case notABundle
    case newerVersion(UInt8)
    case truncated
    case corrupt(String)
    /// An encrypted bundle (§13.1), and the reader has no sync key. `keyID` names the bundle's key.
    case encrypted(keyID: String)
    /// An encrypted bundle sealed with another sync key than the reader's (both named by key id).
    case wrongKey(bundle: String, store: String)
    /// A chunk of an encrypted bundle failed authentication: changed, damaged, moved or cut.
    case authenticationFailed

    package var description: String {
        switch self {
        case .notABundle: "not a Concord bundle"
        case .newerVersion(let version):
            "bundle format version \(version) is newer than this build reads (\(BundleFormat.version)); upgrade Concord"
        case .truncated: "the bundle is truncated"
        case .corrupt(let why): "the bundle is corrupt: \(why)"
        case .encrypted(let keyID):
            "the bundle is encrypted (with sync key \(keyID)), and this store has no sync key"
        case let .wrongKey(bundle, store):
            "the bundle is encrypted with sync key \(bundle), and this store holds sync key \(store)"
        case .authenticationFailed:
            "the encrypted bundle failed authentication: it was changed or damaged after it was written"
        }
    }
}

// MARK: - Writing

/// Writes a bundle as a stream of blocks to `sink`, holding at most one block in memory.
package struct BundleWriter {
    private let sink: (ArraySlice<UInt8>) throws -> Void
    private var fileChecksum = CRC32C()
    private var written = 0
    private var operationCount = 0
    private var blockCount = 0
    private let manifest: BundleManifest
    /// The ids of the operations appended, as runs of consecutive seqs; the last one still grows.
    private var runs: [(replica: ReplicaID, seqs: ClosedRange<UInt64>)] = []

    /// The compacted seqs appended.
    private var compactedRuns: [(replica: ReplicaID, seqs: ClosedRange<UInt64>)] = []

    /// The operations block being filled, and the bytes of entries that close it.
    private var block: OperationsBlock.Encoder
    private let targetBlockBytes: Int

    /// The format version written in the header.
    private let format: UInt8

    /// Starts a bundle: writes the header and the manifest block.
    /// - Parameter format: the newest, which every store's bundles are written in; an older one
    ///   only to write what an older build wrote (SPEC.md §13).
    package init(manifest: BundleManifest, format: UInt8 = BundleFormat.version, sink: @escaping (ArraySlice<UInt8>) throws -> Void) throws {
        precondition((BundleFormat.withoutPurges...BundleFormat.version).contains(format), "bundle format \(format) is not one this build writes")
        precondition(
            format >= BundleFormat.withDroppedRemoves || manifest.droppedStableThrough.entries.isEmpty, "only formats 5 and later say where removes were dropped")
        self.sink = sink
        self.manifest = manifest
        self.format = format
        block = OperationsBlock.Encoder(layout: BundleFormat.layout(format), reach: BundleFormat.reach(format))
        targetBlockBytes = BundleFormat.targetBlockBytes(format)
        try emit(BundleFormat.magic[...] + [format, 0])
        var payload = ByteWriter()
        payload.identifier(manifest.publisher)
        payload.varint(manifest.createdMillis)
        payload.versionVector(manifest.base)
        payload.versionVector(manifest.top)
        if format >= BundleFormat.withDroppedRemoves { payload.versionVector(manifest.droppedStableThrough) }
        try emitBlock(.manifest, payload.bytes)
    }

    /// Adds an operation. Given in ascending order of replica id, then seq (SPEC.md §13,
    /// "Canonical order"), the same operations always make the same raw payloads; any order is
    /// valid, but may make other payloads and more runs.
    package mutating func append(_ operation: Op) throws {
        precondition(!operation.purges || format >= BundleFormat.withoutCompaction, "bundle format \(format) carries no purge")
        // In columns, an operation of 1 MiB or more goes in a block of its own: no block then
        // passes 8 MiB but by one such operation.
        let alone = BundleFormat.layout(format) == .columns && OperationsBlock.isLarge(operation)
        if alone { try flushBlock() }
        block.append(operation)
        operationCount += 1
        if let last = runs.last, last.replica == operation.id.replica, last.seqs.upperBound &+ 1 == operation.id.seq {
            runs[runs.count - 1].seqs = last.seqs.lowerBound...operation.id.seq
        } else {
            runs.append((operation.id.replica, operation.id.seq...operation.id.seq))
        }
        if alone || block.blockBytes >= targetBlockBytes { try flushBlock() }
    }

    /// Adds compacted seqs of `author` (SPEC.md §5.8), in the canonical order of operations: an
    /// export carries every seq it covers without its operation so.
    package mutating func appendCompacted(_ seqs: ClosedRange<UInt64>, of author: ReplicaID) throws {
        precondition(format >= BundleFormat.withoutDroppedRemoves, "bundle format \(format) carries no compacted seqs")
        block.appendCompacted(seqs, of: author)
        compactedRuns.append((author, seqs))
        if let last = runs.last, last.replica == author, last.seqs.upperBound &+ 1 == seqs.lowerBound {
            runs[runs.count - 1].seqs = last.seqs.lowerBound...seqs.upperBound
        } else {
            runs.append((author, seqs))
        }
        if block.blockBytes >= targetBlockBytes { try flushBlock() }
    }

    /// Writes the last operations block and the end block.
    package mutating func finish() throws -> BundleSummary {
        try flushBlock()
        var payload = ByteWriter()
        payload.varint(UInt64(operationCount))
        payload.varint(UInt64(blockCount))
        let checksum = fileChecksum.value
        payload.bytes([24, 16, 8, 0].map { UInt8(truncatingIfNeeded: checksum >> $0) })
        try emitBlock(.end, payload.bytes)
        return BundleSummary(manifest: manifest, operations: operationCount, bytes: written, holds: SeqRanges(runs), compacted: SeqRanges(compactedRuns))
    }

    private mutating func flushBlock() throws {
        guard !block.isEmpty else { return }
        let parts = block.finishParts()
        try emitBlock(.operations, stored: Zstd.compress(parts: parts), rawLength: parts.reduce(0) { $0 + $1.count }, compressed: true)
        blockCount += 1
    }

    /// A manifest or end block: stored as it is.
    private mutating func emitBlock(_ type: BundleFormat.BlockType, _ raw: [UInt8]) throws {
        try emitBlock(type, stored: raw, rawLength: raw.count, compressed: false)
    }

    private mutating func emitBlock(_ type: BundleFormat.BlockType, stored: [UInt8], rawLength: Int, compressed: Bool) throws {
        var header = ByteWriter(capacity: BundleFormat.blockHeaderBytes)
        header.byte(type.rawValue)
        header.byte(compressed ? BundleFormat.compressedFlag : 0)
        header.fixed32(UInt32(stored.count))
        header.fixed32(UInt32(rawLength))
        header.fixed32(CRC32C.checksum(stored))
        try emit(header.bytes[...])
        try emit(stored[...])
    }

    private mutating func emit(_ bytes: ArraySlice<UInt8>) throws {
        fileChecksum.update(bytes)
        written += bytes.count
        try sink(bytes)
    }
}

// MARK: - Reading

/// Where a bundle reader gets its bytes: `read` returns up to `maxCount` bytes, and an empty array
/// only at the end.
package protocol ByteSource {
    mutating func read(maxCount: Int) throws -> [UInt8]
}

/// A byte source over bytes in memory, returning at most `chunk` bytes per read.
package struct MemorySource: ByteSource {
    private let bytes: [UInt8]
    private var offset = 0
    private let chunk: Int

    package init(_ bytes: [UInt8], chunk: Int = .max) {
        self.bytes = bytes
        self.chunk = max(1, chunk)
    }

    package mutating func read(maxCount: Int) -> [UInt8] {
        let count = min(maxCount, chunk, bytes.count - offset)
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }
}

/// Reads a bundle block by block, in memory bounded by the largest block. Every check of
/// SPEC.md §13 is made; `forEachOperation` returns only after the end block has been verified,
/// so a caller that applies operations in a transaction commits only whole, intact bundles.
package struct BundleReader<Source: ByteSource> {
    private var source: Source
    private var fileChecksum = CRC32C()
    private var position = 0
    package private(set) var manifest: BundleManifest?
    /// The format version its header gives (0 before the manifest is read).
    package private(set) var format: UInt8 = 0
    /// The open operations block, and the blocks and operations read before it.
    private var cursor: OperationsBlock.Cursor?
    /// The record table of the blocks read (in format 7; each block of format 6 has its own), while
    /// no cursor holds it.
    private var recordTable = OperationColumns.RecordsByNumber(reach: .block)
    private var blocks = 0
    private var operations = 0
    /// The last block decompressed: its storage is reused for the next one.
    private var decompressed: [UInt8] = []
    /// The ids of the runs of the blocks read, and their compacted seqs, made into `SeqRanges`
    /// once at the end.
    private var runs: [(replica: ReplicaID, seqs: ClosedRange<UInt64>)] = []
    private var compacted: [(replica: ReplicaID, seqs: ClosedRange<UInt64>)] = []
    /// The whole bundle, once its end block has been read and verified.
    package private(set) var summary: BundleSummary?

    package init(_ source: Source) {
        self.source = source
    }

    /// What it reads from (an encrypted bundle's source tells whether it was sealed).
    package var input: Source { source }

    /// Reads the header and the manifest.
    package mutating func readManifest() throws(BundleError) -> BundleManifest {
        if let manifest { return manifest }
        let header = try readExactly(BundleFormat.headerBytes, atStart: true)
        guard Array(header[0..<8]) == BundleFormat.magic else { throw .notABundle }
        guard header[8] <= BundleFormat.version else { throw .newerVersion(header[8]) }
        guard header[8] >= 1 else { throw .corrupt("format version 0") }
        guard header[9] == 0 else { throw .corrupt("header flags 0x\(String(header[9], radix: 16)) are reserved") }
        format = header[8]
        recordTable = OperationColumns.RecordsByNumber(reach: BundleFormat.reach(format))
        let (type, payload) = try readBlock()
        guard type == .manifest else { throw .corrupt("the first block is not the manifest") }
        var reader = ByteReader(payload)
        do {
            let publisher: ReplicaID = try reader.identifier()
            let created = try reader.varint()
            let base = try reader.versionVector()
            let top = try reader.versionVector()
            let dropped = header[8] >= BundleFormat.withDroppedRemoves ? try reader.versionVector() : VersionVector()
            guard reader.isAtEnd else { throw DecodeError.malformed("bytes after the manifest") }
            let manifest = BundleManifest(publisher: publisher, createdMillis: created, base: base, top: top, droppedStableThrough: dropped)
            self.manifest = manifest
            return manifest
        } catch {
            throw .corrupt("manifest: \(error)")
        }
    }

    /// Calls `body` with every operation, block by block, then verifies the end block.
    @discardableResult
    package mutating func forEachOperation(_ body: (Op) throws -> Void) throws -> BundleSummary {
        while let operation = try nextOperation() { try body(operation) }
        return summary!
    }

    /// The next operation, read block by block; nil once the end block has been read and verified
    /// (`summary` then describes the bundle).
    package mutating func nextOperation() throws(BundleError) -> Op? {
        while true {
            if cursor != nil {
                do {
                    if let operation = try cursor!.next() { return operation }
                } catch {
                    throw .corrupt("block \(blocks): \(error)")
                }
                operations += cursor!.operations
                runs += cursor!.runs
                compacted += cursor!.compacted
                if let table = cursor!.table { recordTable = table }
                cursor = nil
                recordTable.endBlock()
            }
            if summary != nil { return nil }
            let manifest = try readManifest()
            let checksumBefore = fileChecksum.value
            let (type, payload) = try readBlock()
            switch type {
            case .manifest:
                throw .corrupt("a second manifest")
            case .operations:
                blocks += 1
                do {
                    cursor = try OperationsBlock.Cursor(payload, layout: BundleFormat.layout(format), table: takeRecordTable())
                } catch {
                    throw .corrupt("block \(blocks): \(error)")
                }
            case .end:
                try verifyEnd(payload, checksum: checksumBefore)
                summary = BundleSummary(
                    manifest: manifest, operations: operations, bytes: position, holds: SeqRanges(runs), compacted: SeqRanges(compacted))
                runs = []
                compacted = []
                return nil
            }
        }
    }

    /// The record table, handed to the next block's cursor as the only reference to its storage,
    /// which the cursor then extends without a copy.
    private mutating func takeRecordTable() -> OperationColumns.RecordsByNumber {
        defer { recordTable = OperationColumns.RecordsByNumber(reach: recordTable.reach) }
        return recordTable
    }

    private mutating func verifyEnd(_ payload: [UInt8], checksum expected: UInt32) throws(BundleError) {
        var reader = ByteReader(payload)
        do {
            let declaredOperations = try reader.varint()
            let declaredBlocks = try reader.varint()
            let checksum = try reader.bytes(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            guard reader.isAtEnd else { throw DecodeError.malformed("bytes after the end block's fields") }
            guard declaredOperations == UInt64(operations), declaredBlocks == UInt64(blocks) else {
                throw BundleError.corrupt("the end block counts \(declaredOperations) operations in \(declaredBlocks) blocks, the bundle holds \(operations) in \(blocks)")
            }
            guard checksum == expected else { throw BundleError.corrupt("the file checksum does not match") }
        } catch let error as BundleError {
            throw error
        } catch {
            throw .corrupt("end block: \(error)")
        }
        let after: [UInt8]
        do {
            after = try source.read(maxCount: 1)
        } catch let error as BundleError {
            throw error
        } catch {
            throw .corrupt("cannot read: \(error)")
        }
        guard after.isEmpty else { throw .corrupt("bytes after the end block") }
    }

    private mutating func readBlock() throws(BundleError) -> (BundleFormat.BlockType, [UInt8]) {
        let header = try readExactly(BundleFormat.blockHeaderBytes)
        guard let type = BundleFormat.BlockType(rawValue: header[0]) else { throw .corrupt("unknown block type \(header[0])") }
        let flags = header[1]
        guard flags & ~BundleFormat.compressedFlag == 0 else { throw .corrupt("block flags 0x\(String(flags, radix: 16)) are reserved") }
        let compressed = flags & BundleFormat.compressedFlag != 0
        guard compressed == (type == .operations) else { throw .corrupt("the \(type) block has the wrong compression flag") }
        func field(_ offset: Int) -> Int { header[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) } }
        let storedLength = field(2)
        let rawLength = field(6)
        let checksum = UInt32(field(10))
        // Lengths are checked before anything is allocated for them.
        guard storedLength <= BundleFormat.maxBlockBytes, rawLength <= BundleFormat.maxBlockBytes else {
            throw .corrupt("a block claims \(max(storedLength, rawLength)) bytes, over the \(BundleFormat.maxBlockBytes)-byte limit")
        }
        guard compressed || storedLength == rawLength else { throw .corrupt("an uncompressed block with two lengths") }
        let stored = try readExactly(storedLength)
        guard CRC32C.checksum(stored) == checksum else { throw .corrupt("checksum mismatch in the \(type) block") }
        guard compressed else { return (type, stored) }
        try Zstd.decompress(stored[...], size: rawLength, into: &decompressed)
        return (type, decompressed)
    }

    private mutating func readExactly(_ count: Int, atStart: Bool = false) throws(BundleError) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(count)
        while result.count < count {
            let chunk: [UInt8]
            do {
                chunk = try source.read(maxCount: count - result.count)
            } catch let error as BundleError {
                throw error  // an encrypted bundle's source: a failed chunk, a cut file
            } catch {
                throw .corrupt("cannot read: \(error)")
            }
            guard !chunk.isEmpty else {
                // A file that ends inside the magic is not a bundle at all; one that ends later is a
                // truncated bundle.
                let magic = BundleFormat.magic
                let magicSeen = result.count >= magic.count ? result.starts(with: magic) : !result.isEmpty && magic.starts(with: result)
                throw atStart && !magicSeen ? .notABundle : .truncated
            }
            result += chunk
        }
        fileChecksum.update(result)
        position += result.count
        return result
    }
}

extension ByteWriter {
    /// Four bytes, big-endian.
    mutating func fixed32(_ value: UInt32) {
        bytes([24, 16, 8, 0].map { UInt8(truncatingIfNeeded: value >> $0) })
    }
}
