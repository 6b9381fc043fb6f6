import ConcordCore
import Foundation

/// Keeps operations in bounded memory and gives them back in the order they were added and in
/// record order (`RecordRef` order, each record's operations in the order they were added): a
/// classic external merge sort (SPEC.md §5.6).
///
/// Operations are kept encoded, each as a varint length and its bytes: its author's number
/// (shifted left by one, with the low bit set when it is to be sorted), its seq, and its encoding
/// alone. A run of at most
/// `runOperations` operations or `runBytes` bytes is kept in memory; when a second run starts (or
/// the sort is finished `toFile`), each full run is written to a temporary file once: the
/// operations to be sorted, sorted, then the others, then where each operation is in those bytes,
/// in the order added (a 4-byte offset each). The file is unlinked as soon as it is opened, so a
/// crash leaves nothing behind. Record order reads every run at once, each through a small
/// window; the order added reads one run at a time, whole. Sorts finished to their files can be
/// read as one (`Finished.concatenating`): a merge in parts applies its parts so. (Each run written twice, as added and as sorted, made a merge 5% slower:
/// Benchmarks/README.md.)
struct OperationSorter {
    /// Where a run's operation is in `buffer`, with its record's sort key.
    private struct Entry {
        var high: UInt64
        var low: UInt64
        var kind: UInt8
        /// Where its length prefix starts, and how many bytes it takes with the prefix.
        var offset: UInt32
        var length: UInt32
        /// Which operation of its run it is, in the order added.
        var ordinal: UInt32

        /// Record order, then the order of adding (offsets grow as operations are added).
        static func precedes(_ a: Entry, _ b: Entry) -> Bool {
            (a.high, a.low, a.kind, a.offset) < (b.high, b.low, b.kind, b.offset)
        }
    }

    private let spillPath: String
    private let runOperations: Int
    private let runBytes: Int
    /// Authors are numbered in the encoded operations.
    private var authors: [ReplicaID] = []
    private var authorNumbers: [ReplicaID: Int] = [:]
    /// The last operation's author and its number: operations come in runs of one author, and
    /// hashing an id for each costs more than the rest of `add`.
    private var lastAuthor: (id: ReplicaID, number: Int)?
    private var buffer = ByteWriter()
    private var scratch = ByteWriter(capacity: 256)
    private var inRun = 0
    /// The operations of the run in memory that are to be sorted.
    private var entries: [Entry] = []
    /// The runs written so far (`SpilledRun`).
    private var runs: [SpilledRun] = []
    private var file: SpillFile?
    /// The bytes written to `file` so far.
    private var fileSize: Int64 = 0
    /// How many operations were added, and how many of them are to be sorted.
    private(set) var count = 0
    private(set) var sortedCount = 0

    /// - Parameter spillPath: where the temporary file goes if one is needed (beside the store:
    ///   the system's temporary directory may be memory).
    init(spillPath: String, runOperations: Int = 125_000, runBytes: Int = 4 << 20) {
        self.spillPath = spillPath
        self.runOperations = max(1, runOperations)
        self.runBytes = max(1, min(runBytes, Int(UInt32.max) / 2))
        // Reserved whole, so that growing never doubles them nor copies them: only the pages a
        // merge writes are ever faulted in, and a small merge (a peer's batch) writes few.
        buffer = ByteWriter(capacity: min(self.runBytes, self.runOperations * 64) + 64 << 10)
        entries.reserveCapacity(min(self.runOperations, 1 << 20))
    }

    /// Adds an operation; only those `sorting` come back in record order.
    mutating func add(_ operation: Op, sorting: Bool = true) throws {
        if inRun >= runOperations || buffer.bytes.count >= runBytes { try spill() }
        let author: Int
        if let last = lastAuthor, last.id == operation.id.replica {
            author = last.number
        } else if let known = authorNumbers[operation.id.replica] {
            author = known
        } else {
            author = authors.count
            authors.append(operation.id.replica)
            authorNumbers[operation.id.replica] = author
        }
        lastAuthor = (operation.id.replica, author)
        scratch.removeAll()
        scratch.varint(UInt64(author) << 1 | (sorting ? 1 : 0))
        scratch.varint(operation.id.seq)
        var encoder = OperationCodec.RunEncoder()
        encoder.append(operation, into: &scratch)
        let start = buffer.bytes.count
        buffer.varint(UInt64(scratch.bytes.count))
        buffer.bytes(scratch.bytes)
        if sorting {
            let id = operation.record.id
            entries.append(Entry(
                high: id.high, low: id.low, kind: operation.record.kind.rawValue,
                offset: UInt32(start), length: UInt32(buffer.bytes.count - start), ordinal: UInt32(inRun)))
            sortedCount += 1
        }
        inRun += 1
        count += 1
    }

    /// Writes the run held in memory to the file: the operations to be sorted, sorted, then the
    /// others as added, then each operation's offset in those bytes in the order added (through a
    /// small buffer, so that the run is not copied whole).
    private mutating func spill() throws {
        guard inRun > 0 else { return }
        if file == nil { file = try SpillFile(path: spillPath) }
        entries.sort(by: Entry.precedes)
        let start = fileSize
        // Where each operation of the run goes, by its ordinal; `.max` for one not sorted yet.
        var moved = [UInt32](repeating: .max, count: inRun)
        var out = ByteWriter(capacity: 1 << 20)
        var written = 0
        func emit(_ bytes: UnsafeBufferPointer<UInt8>) throws {
            out.bytes(bytes)
            written += bytes.count
            if out.bytes.count >= 1 << 20 {
                _ = try appendToFile(out.bytes)
                out.removeAll()
            }
        }
        try buffer.bytes.withUnsafeBufferPointer { bytes in
            for entry in entries {
                moved[Int(entry.ordinal)] = UInt32(written)
                try emit(UnsafeBufferPointer(rebasing: bytes[Int(entry.offset)..<Int(entry.offset + entry.length)]))
            }
            let sortedBytes = written
            if entries.count < inRun {
                // Those only kept (most often none), found by walking the run in the order added.
                var reader = ByteReader(buffer.bytes)
                for ordinal in moved.indices {
                    let offset = reader.offset
                    _ = try reader.bytes(Int(try reader.varint()))
                    guard moved[ordinal] == .max else { continue }
                    moved[ordinal] = UInt32(written)
                    try emit(UnsafeBufferPointer(rebasing: bytes[offset..<reader.offset]))
                }
            }
            precondition(written == buffer.bytes.count, "a spilled run lost or doubled an operation")
            for offset in moved { withUnsafeBytes(of: offset.littleEndian) { out.bytes($0) } }
            _ = try appendToFile(out.bytes)
            runs.append(SpilledRun(start: start, sortedBytes: sortedBytes, bytes: written, count: inRun))
        }
        entries.removeAll(keepingCapacity: true)
        buffer.removeAll()
        inRun = 0
    }

    /// Appends `bytes` to the file and returns the offset they start at.
    private mutating func appendToFile(_ bytes: [UInt8]) throws -> Int64 {
        let start = fileSize
        try file!.write(bytes, at: start)
        fileSize += Int64(bytes.count)
        return start
    }

    /// Ends adding: the operations can now be read in both orders, each as often as needed.
    ///
    /// - Parameter toFile: write a run held in memory to the file too, so that the result holds
    ///   no memory and can be concatenated with others (`Finished.concatenating`).
    consuming func finish(toFile: Bool = false) throws -> Finished {
        if runs.isEmpty, !toFile || inRun == 0 {
            entries.sort(by: Entry.precedes)
            return Finished(
                count: count, sortedCount: sortedCount,
                memory: (authors, buffer.bytes, entries.map { Int($0.offset) }), files: [])
        }
        try spill()
        return Finished(count: count, sortedCount: sortedCount, memory: nil, files: [SortFile(file: file!, authors: authors, runs: runs)])
    }

    /// The operations added, ready to be read, on any thread.
    struct Finished: Sendable {
        /// How many were added, and how many of them to be sorted.
        let count: Int
        let sortedCount: Int
        /// The one run, when it stayed in memory: the operations as added, and where each one to
        /// be sorted starts, in record order.
        fileprivate let memory: (authors: [ReplicaID], bytes: [UInt8], sorted: [Int])?
        /// Otherwise the runs, in files: one for each sort concatenated (one for a sort alone).
        fileprivate let files: [SortFile]

        fileprivate init(count: Int, sortedCount: Int, memory: ([ReplicaID], [UInt8], [Int])?, files: [SortFile]) {
            self.count = count
            self.sortedCount = sortedCount
            self.memory = memory.map { (authors: $0.0, bytes: $0.1, sorted: $0.2) }
            self.files = files
        }

        /// The operations of `parts` as those of one sort: in the order added, one part after the
        /// other; in record order, each record's operations in the order of the parts, then of
        /// adding. Each part must have been finished `toFile`, unless it is the only one that
        /// holds any.
        static func concatenating(_ parts: [Finished]) -> Finished {
            let parts = parts.filter { $0.count > 0 }
            if parts.count == 1 { return parts[0] }
            precondition(parts.allSatisfy { $0.memory == nil }, "a sort held in memory is concatenated with others")
            return Finished(
                count: parts.reduce(0) { $0 + $1.count }, sortedCount: parts.reduce(0) { $0 + $1.sortedCount },
                memory: nil, files: parts.flatMap(\.files))
        }

        /// Every operation, in the order added.
        func addedOrder() -> Stream { Stream(self, sorted: false) }

        /// The operations added with `sorting`, in record order.
        func recordOrder() -> Stream { Stream(self, sorted: true) }
    }

    /// A sort's runs in its file, with the authors its operations number.
    fileprivate struct SortFile: Sendable {
        let file: SpillFile
        let authors: [ReplicaID]
        let runs: [SpilledRun]
    }

    /// Operations one at a time.
    struct Stream {
        private let sorted: Bool
        private var memory: (authors: [ReplicaID], bytes: [UInt8], sorted: [Int])?
        private var position = 0
        /// In the order added, the runs in their files, and the one read (whole) and how far.
        private var runs: [(file: SpillFile, authors: [ReplicaID], run: SpilledRun)] = []
        private var run: (bytes: [UInt8], offsets: [Int], next: Int)?
        /// In record order, each run's reader, and the operation at its head.
        private var readers: [RunReader] = []
        private var heads: [Op?] = []
        /// Their records, apart: the heap compares them, and reading one out of `heads` would
        /// copy the whole operation.
        private var headRecords: [RecordRef?] = []
        /// Runs whose head is not nil, as a binary heap (least head first).
        private var heap: [Int] = []
        private var started = false

        fileprivate init(_ finished: Finished, sorted: Bool) {
            self.sorted = sorted
            memory = finished.memory
            for sort in finished.files {
                for run in sort.runs {
                    if sorted {
                        readers.append(RunReader(file: sort.file, authors: sort.authors, range: run.start..<run.start + Int64(run.sortedBytes)))
                    } else {
                        runs.append((sort.file, sort.authors, run))
                    }
                }
            }
        }

        mutating func next() throws -> Op? {
            if !sorted {
                guard let (bytes, entry) = try nextAdded() else { return nil }
                var reader = ByteReader(bytes, offset: entry.lowerBound)
                let (number, seq) = try Self.prefix(&reader)
                guard let author = addedAuthor(number) else { throw Self.unknownAuthor(number) }
                return try Self.decode(&reader, author: author, seq: seq)
            }
            if let memory {
                guard position < memory.sorted.count else { return nil }
                var reader = ByteReader(memory.bytes, offset: memory.sorted[position])
                position += 1
                _ = try? reader.varint()  // its length
                let (number, seq) = try Self.prefix(&reader)
                guard number < memory.authors.count else { throw Self.unknownAuthor(number) }
                return try Self.decode(&reader, author: memory.authors[number], seq: seq)
            }
            if !started {
                started = true
                for index in readers.indices {
                    let head = try head(of: index)
                    headRecords.append(head?.record)
                    heads.append(head)
                    if headRecords[index] != nil { heap.append(index) }
                }
                for position in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(position) }
            }
            // A binary heap of the runs by their heads; the earlier run wins a tie (it was added first).
            guard let least = heap.first else { return nil }
            let operation = heads[least].take()
            let next = try head(of: least)
            headRecords[least] = next?.record
            heads[least] = next
            if headRecords[least] == nil {
                heap[0] = heap[heap.count - 1]
                heap.removeLast()
            }
            if !heap.isEmpty { siftDown(0) }
            return operation
        }

        /// In the order added, the next operation as kept: its id, and its encoding alone, not
        /// decoded (for the log, `RunEncoder.append(encodedAlone:in:into:)`).
        mutating func nextKept() throws -> KeptOperation? {
            precondition(!sorted, "kept operations come in the order added")
            guard let (bytes, entry) = try nextAdded() else { return nil }
            var reader = ByteReader(bytes, offset: entry.lowerBound)
            do {
                let tagged = try reader.varint()
                let (number, sorted) = (Int(clamping: tagged >> 1), tagged & 1 == 1)
                let seq = try reader.varint()
                guard let author = addedAuthor(number), reader.offset < entry.upperBound else { throw DecodeError.truncated }
                return KeptOperation(
                    id: OperationID(replica: author, seq: seq), sorted: sorted, bytes: bytes,
                    range: reader.offset..<entry.upperBound)
            } catch {
                throw OperationSorter.damaged(error)
            }
        }

        /// The author numbered `number` in the sort of the operation `nextAdded()` gave last.
        private func addedAuthor(_ number: Int) -> ReplicaID? {
            if let memory { return number < memory.authors.count ? memory.authors[number] : nil }
            return number < runs[position].authors.count ? runs[position].authors[number] : nil
        }

        /// The bytes that hold the next operation in the order added, and where its entry is in
        /// them (after its length prefix).
        private mutating func nextAdded() throws -> (bytes: [UInt8], entry: Range<Int>)? {
            if let memory {
                guard position < memory.bytes.count else { return nil }
                var reader = ByteReader(memory.bytes, offset: position)
                let length = (try? reader.varint()).map { Int(clamping: $0) } ?? 0
                guard length <= reader.remaining else { throw OperationSorter.damaged(DecodeError.truncated) }
                position = reader.offset + length
                return (memory.bytes, reader.offset..<position)
            }
            // The runs one after the other, each read whole, its operations taken where its
            // offsets say.
            while position < runs.count {
                if run == nil {
                    let (file, spilled) = (runs[position].file, runs[position].run)
                    var bytes: [UInt8] = []
                    var raw: [UInt8] = []
                    try file.read(at: spilled.start, count: spilled.bytes, appendingTo: &bytes)
                    try file.read(at: spilled.start + Int64(spilled.bytes), count: 4 * spilled.count, appendingTo: &raw)
                    let offsets = raw.withUnsafeBytes { raw in
                        (0..<spilled.count).map { Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 4 * $0, as: UInt32.self))) }
                    }
                    run = (bytes, offsets, 0)
                }
                if run!.next < run!.offsets.count {
                    let offset = run!.offsets[run!.next]
                    run!.next += 1
                    guard offset < run!.bytes.count else { throw OperationSorter.damaged(DecodeError.truncated) }
                    var reader = ByteReader(run!.bytes, offset: offset)
                    let length = (try? reader.varint()).map { Int(clamping: $0) } ?? .max
                    guard length <= reader.remaining else { throw OperationSorter.damaged(DecodeError.truncated) }
                    return (run!.bytes, reader.offset..<reader.offset + length)
                }
                run = nil
                position += 1
            }
            return nil
        }

        private func precedes(_ a: Int, _ b: Int) -> Bool {
            let (x, y) = (headRecords[a]!, headRecords[b]!)
            return x < y || (x == y && a < b)
        }

        private mutating func siftDown(_ start: Int) {
            var parent = start
            while true {
                var least = parent
                for child in [2 * parent + 1, 2 * parent + 2] where child < heap.count && precedes(heap[child], heap[least]) {
                    least = child
                }
                guard least != parent else { return }
                heap.swapAt(parent, least)
                parent = least
            }
        }

        /// The next operation of run `index`, decoded.
        private mutating func head(of index: Int) throws -> Op? {
            guard let entry = try readers[index].next() else { return nil }
            var reader = ByteReader(readers[index].window, offset: entry.lowerBound)
            // The author is looked up where the table is, not passed: passing it would retain and
            // release the table for every operation (3% of a merge).
            let (number, seq) = try Self.prefix(&reader)
            guard number < readers[index].authors.count else { throw Self.unknownAuthor(number) }
            return try Self.decode(&reader, author: readers[index].authors[number], seq: seq)
        }

        /// Reads the author's number and the seq of an operation at `reader`, after its length
        /// prefix.
        private static func prefix(_ reader: inout ByteReader) throws -> (author: Int, seq: UInt64) {
            do {
                let author = try reader.varint() >> 1
                return (Int(clamping: author), try reader.varint())
            } catch {
                throw OperationSorter.damaged(error)
            }
        }

        private static func unknownAuthor(_ number: Int) -> ConcordError {
            OperationSorter.damaged(DecodeError.malformed("author \(number)"))
        }

        /// Decodes the rest of an operation at `reader`, past its `prefix`.
        private static func decode(_ reader: inout ByteReader, author: ReplicaID, seq: UInt64) throws -> Op {
            do {
                var run = OperationCodec.RunDecoder(author: author, firstSeq: seq, count: 1)
                guard let operation = try run.next(from: &reader) else { throw DecodeError.malformed("compacted seqs kept as an operation") }
                return operation
            } catch {
                throw OperationSorter.damaged(error)
            }
        }
    }

    /// A run written to the file: from `start`, `bytes` bytes of its `count` operations (the
    /// first `sortedBytes` of them those to be sorted, sorted), then `count` 4-byte little-endian
    /// offsets in those bytes, in the order added.
    fileprivate struct SpilledRun: Sendable {
        var start: Int64
        var sortedBytes: Int
        var bytes: Int
        var count: Int
    }

    /// How many bytes a run's reader reads from the file at least, into its window.
    static var windowBytes: Int { 64 << 10 }

    static func damaged(_ error: any Error) -> ConcordError {
        ConcordError(.io, "the merge's sort file was damaged while it was read (\(error))")
    }

    /// Reads one run from the file through a buffer.
    private struct RunReader {
        let file: SpillFile
        /// The authors its operations number.
        let authors: [ReplicaID]
        var unread: Int64
        let end: Int64
        private(set) var window: [UInt8] = []
        var position = 0

        init(file: SpillFile, authors: [ReplicaID], range: Range<Int64>) {
            self.file = file
            self.authors = authors
            unread = range.lowerBound
            end = range.upperBound
        }

        /// Where the next operation is in `window` (past its length prefix), nil at the end of the run.
        mutating func next() throws -> Range<Int>? {
            while true {
                guard position < window.count || unread < end else {
                    window = []
                    return nil
                }
                var reader = ByteReader(window, offset: position)
                if let length = try? reader.varint(), reader.remaining >= Int(clamping: length) {
                    position = reader.offset + Int(length)
                    return reader.offset..<position
                }
                // Not all of it is in the window: move what is left to the front and read on
                // behind it, in the same storage (a new window each time would be a fresh
                // allocation, its pages faulted in anew, for every window of the run), up to the
                // window's size; an operation larger than half of it doubles the window. The
                // sorted runs are read all at once, a window each, and a merge of 7.9 million
                // operations has 64 of them: the folding thread's heap held 17.7 MB with windows
                // of 256 KiB that grew as they were refilled (in 32 runs).
                guard unread < end else { throw ConcordError(.io, "the merge's sort file ends inside an operation") }
                let left = window.count - position
                let wanted = Int(min(end - unread, Int64(max(OperationSorter.windowBytes - left, left))))
                window.removeSubrange(..<position)
                try file.read(at: unread, count: wanted, appendingTo: &window)
                unread += Int64(wanted)
                position = 0
            }
        }
    }
}

/// An operation as `OperationSorter` keeps it: its id, and its encoding alone (what a fresh
/// `OperationCodec.RunEncoder` writes for it) in `bytes[range]`.
struct KeptOperation {
    let id: OperationID
    /// Whether it was added to be sorted: counted new when it was read.
    let sorted: Bool
    let bytes: [UInt8]
    let range: Range<Int>
}

/// A temporary file that no directory lists: unlinked once opened, gone when closed. It holds
/// nothing but its descriptor (its writer counts what it wrote), so a sorter's finished runs may
/// be read on another thread.
final class SpillFile: Sendable {
    private let descriptor: Int32

    /// Creates the file at `path` (which must not exist) and unlinks it.
    init(path: String) throws {
        descriptor = open(path, O_RDWR | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else {
            throw ConcordError(.io, "cannot create \(path) to sort a merge: \(String(cString: strerror(errno)))")
        }
        unlink(path)
    }

    deinit { close(descriptor) }

    /// Writes `bytes` at `start`.
    func write(_ bytes: [UInt8], at start: Int64) throws {
        try bytes.withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                let written = pwrite(descriptor, raw.baseAddress! + done, raw.count - done, off_t(start + Int64(done)))
                guard written > 0 else {
                    if written < 0, errno == EINTR { continue }
                    throw ConcordError(.io, "cannot write the merge's sort file: \(String(cString: strerror(errno)))")
                }
                done += written
            }
        }
    }

    /// Reads `count` bytes at `offset` onto the end of `buffer`.
    func read(at offset: Int64, count: Int, appendingTo buffer: inout [UInt8]) throws {
        let start = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: count))
        try buffer.withUnsafeMutableBytes { raw in
            let raw = UnsafeMutableRawBufferPointer(rebasing: raw[start...])
            var done = 0
            while done < count {
                let read = pread(descriptor, raw.baseAddress! + done, count - done, off_t(offset + Int64(done)))
                guard read > 0 else {
                    if read < 0, errno == EINTR { continue }
                    throw ConcordError(.io, "cannot read the merge's sort file: \(read == 0 ? "it ends early" : String(cString: strerror(errno)))")
                }
                done += read
            }
        }
    }
}
