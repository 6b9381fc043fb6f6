import ConcordCore
import GRDB

/// Reads the operations of one record that its operation spans name out of the log (SPEC.md §9,
/// "Reading a record's history"): each log row that holds one of them is read and decoded once,
/// however many of the spans it holds, and of each row only the record's operations are built.
///
/// A record written now and then among other records' writes has one span per write, and one row
/// of 4096 operations may hold thousands of its spans: reading the row again for each span made
/// the history of a record of 10,000 such writes take seconds.
struct SpanReader {
    /// The record whose operations are kept; nil: every operation the spans name, whatever its
    /// record (the spans of several records, read at once).
    let ref: RecordRef?
    /// How many log rows were read and decoded (a test checks that it is each row once).
    private(set) var rowsRead = 0

    /// A reader of `ref`'s operations, or (nil) of every operation the spans name.
    init(_ ref: RecordRef?) {
        self.ref = ref
    }

    /// The operations of the record that `spans` name, replica by replica, each in seq order.
    mutating func operations(in spans: OperationSpans, _ db: Database, _ directory: ReplicaDirectory) throws -> [Op] {
        var operations: [Op] = []
        var rest = spans.spans[...]
        while let replica = rest.first?.replica {
            let ofReplica = rest.prefix { $0.replica == replica }
            rest = rest.dropFirst(ofReplica.count)
            guard let index = directory.indexByID[replica] else { continue }
            try read(ofReplica, of: replica, at: index, db, into: &operations)
        }
        return operations
    }

    /// Reads the rows of one replica that hold `spans`, ascending and all of that replica, in
    /// order: a row that holds several spans is read once, for all of them.
    private mutating func read(
        _ spans: ArraySlice<OperationSpans.Span>, of replica: ReplicaID, at index: Int64, _ db: Database,
        into operations: inout [Op]
    ) throws {
        var spans = spans
        // The seqs below `next` are in rows read already.
        var next: UInt64 = 0
        while let span = spans.first {
            let seq = max(next, span.first)
            guard seq <= span.last, let row = try Self.row(of: index, holdingOrAfter: seq, through: span.last, db) else {
                spans.removeFirst()
                continue
            }
            rowsRead += 1
            do {
                var reader = ByteReader(row.ops)
                var run = OperationCodec.RunDecoder(author: replica, firstSeq: row.first, count: row.last - row.first + 1)
                while !run.isAtEnd {
                    let seq = run.nextSeq
                    while let span = spans.first, span.last < seq { spans.removeFirst() }
                    // Another record's operation, or one no span names, is read past unbuilt.
                    let named = spans.first.map { $0.first <= seq } ?? false
                    let operation = named && ref == nil ? try run.next(from: &reader) : try run.next(from: &reader, ifItActsOn: named ? ref : nil)
                    if let operation { operations.append(operation) }
                }
                guard reader.isAtEnd else { throw DecodeError.malformed("\(reader.remaining) bytes after the last operation") }
            } catch {
                throw ConcordError(.corrupt, "a log chunk of replica \(replica) is damaged (\(error))")
            }
            next = row.last + 1
        }
    }

    /// One log row: its seqs and its encoded run.
    private struct Row {
        var first: UInt64
        var last: UInt64
        var ops: [UInt8]
    }

    /// The row of replica `index` that holds `seq`: the last one that starts at or before it; or,
    /// if that one ends before `seq` (a gap in the log), the first that starts from `seq` through
    /// `last`; nil if there is none.
    private static func row(of index: Int64, holdingOrAfter seq: UInt64, through last: UInt64, _ db: Database) throws -> Row? {
        let holding = try HotStatement(db, "SELECT first_seq, last_seq, ops FROM log WHERE replica = ? AND first_seq <= ? ORDER BY first_seq DESC LIMIT 1")
        holding.bind(1, index)
        holding.bind(2, Int64(seq))
        if try holding.step(), UInt64(bitPattern: holding.int64(1)) >= seq {
            return try Self.row(holding)
        }
        let after = try HotStatement(db, "SELECT first_seq, last_seq, ops FROM log WHERE replica = ? AND first_seq BETWEEN ? AND ? ORDER BY first_seq LIMIT 1")
        after.bind(1, index)
        after.bind(2, Int64(seq))
        after.bind(3, Int64(last))
        return try after.step() ? try Self.row(after) : nil
    }

    /// The row `statement` stands on, its range checked (its `ops` are read only here: a row
    /// passed over is not read).
    private static func row(_ statement: borrowing HotStatement) throws -> Row {
        let first = UInt64(bitPattern: statement.int64(0))
        let last = UInt64(bitPattern: statement.int64(1))
        guard first >= 1, first <= last, last < UInt64(Int64.max) else {
            throw ConcordError(.corrupt, "a log row has an impossible range")
        }
        return Row(first: first, last: last, ops: statement.withBlob(2) { [UInt8]($0) })
    }
}
