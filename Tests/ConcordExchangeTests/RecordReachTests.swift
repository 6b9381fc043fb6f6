import ConcordCore
import ConcordWire
import Foundation
import Testing

/// Which records a block of columns names by number (SPEC.md §13, "The record table"): in format 6
/// the entries of its own block's table, in format 7 the last 131,072 entries of its bundle's, in
/// it or in the blocks before it.
@Suite struct RecordReachTests {
    typealias Columns = OperationColumnsTests
    static let reach = OperationColumns.Reach.bundleEntries

    /// Decodes `payloads` as the blocks of one bundle, each going on from the record table of the
    /// one before.
    static func decode(_ payloads: [[UInt8]], reach: OperationColumns.Reach) throws -> [Op] {
        var table = OperationColumns.RecordsByNumber(reach: reach)
        var decoded: [Op] = []
        for payload in payloads {
            var cursor = try OperationsBlock.Cursor(payload, layout: .columns, table: table)
            while let operation = try cursor.next() { decoded.append(operation) }
            table = cursor.table!
            table.endBlock()
        }
        return decoded
    }

    static func refusal(_ payloads: [[UInt8]], reach: OperationColumns.Reach) -> String? {
        do {
            _ = try decode(payloads, reach: reach)
            return nil
        } catch {
            return "\(error)"
        }
    }

    /// The operations in two payloads, the second cut from the first where a bundle's blocks end.
    static func payloads(_ first: [Op], _ second: [Op], reach: OperationColumns.Reach) -> [[UInt8]] {
        var encoder = OperationsBlock.Encoder(layout: .columns, reach: reach)
        for operation in first { encoder.append(operation) }
        let one = encoder.finish()
        for operation in second { encoder.append(operation) }
        return [one, encoder.finish()]
    }

    static let first = Array(Columns.operations.prefix(9))
    static let second = Array(Columns.operations.suffix(5))

    @Test func format7NamesByNumberARecordThatAnEarlierBlockListed() throws {
        let perBundle = Self.payloads(Self.first, Self.second, reach: .bundle)
        #expect(try Self.decode(perBundle, reach: .bundle) == Columns.operations)
        // The second block lists no record: both were listed in the first.
        let (_, columns) = try Columns.parts(perBundle[1])
        #expect(columns[4].isEmpty && columns[5].isEmpty && columns[6].isEmpty, "\(columns[4]), \(columns[6])")
        #expect(columns[3] == [1, 2, 1], "milk is the first record the bundle listed, ideas the second")

        // Format 6's second block lists them again, and each block stands alone.
        let perBlock = Self.payloads(Self.first, Self.second, reach: .block)
        #expect(try Self.decode(perBlock, reach: .block) == Columns.operations)
        #expect(try Columns.parts(perBlock[1]).columns[4].count == 2)
        #expect(perBundle[1].count + 2 * 10 < perBlock[1].count)

        // Read alone, or as a block of format 6, the second block of format 7 names what no entry is.
        #expect(Self.refusal([perBundle[1]], reach: .bundle)?.contains("record #1 of a bundle that named 0 so far") == true)
        #expect(Self.refusal(perBundle, reach: .block)?.contains("record #1 of a block that named 0 so far") == true)
    }

    /// One operation on each of 131,073 records, their ids a millisecond apart, then on the first
    /// and the third again: the first is out of reach and is listed again, its time a delta from
    /// the last entry of the block before; the third is named by its number.
    @Test func aRecordOutOfReachIsListedAgain() throws {
        let records = (0...Self.reach).map { RecordRef(kind: .note, id: RecordID(high: UInt64(1_800_000_000_000 + $0) << 16, low: UInt64($0))) }
        let first = records.enumerated().map { Columns.op(Columns.a, UInt64($0.offset + 1), 100, $0.element, .assign(.pinned, .bool(true))) }
        let second = [records[0], records[2]].enumerated().map {
            Columns.op(Columns.a, UInt64(records.count + $0.offset + 1), 101, $0.element, .assign(.pinned, .bool(false)))
        }
        let payloads = Self.payloads(first, second, reach: .bundle)
        #expect(try Self.decode(payloads, reach: .bundle) == first + second)
        let (head, columns) = try Columns.parts(payloads[1])
        #expect(columns[3] == [0, 3], "the first record listed again, the third named by its number")
        #expect(columns[4] == [RecordKind.note.rawValue])
        var delta = ByteWriter()
        delta.signedVarint(-Int64(Self.reach))
        #expect(columns[5] == delta.bytes, "its time, less that of the last record the first block listed")

        // A block that names the first record by its number names it out of reach.
        var outOfReach = columns
        outOfReach[3] = [1, 3]
        let damaged = [payloads[0], Columns.assemble(head, outOfReach)]
        #expect(
            Self.refusal(damaged, reach: .bundle)?.contains("record #1 of a bundle that named 131073 so far, more than 131072 names back") == true)
    }

    /// The writer's numbers and the reader's table agree at every record, whether it comes back
    /// just within reach, just out of it, or long after.
    @Test func theTablesAgreeAtTheEdgeOfTheReach() throws {
        var numbers = OperationColumns.NumbersByRecord(reach: .bundle)
        var table = OperationColumns.RecordsByNumber(reach: .bundle)
        var fresh = 0
        func newRecord() -> RecordRef {
            fresh += 1
            return RecordRef(kind: .reminder, id: RecordID(high: 1, low: UInt64(fresh)))
        }
        var listed: [RecordRef] = []  // every entry, in order
        var byNumber = 0
        func use(_ record: RecordRef) throws {
            if let number = numbers.number(orListing: record) {
                #expect(try table.record(number: UInt64(number)) == record)
                byNumber += 1
            } else {
                table.list(record)
                listed.append(record)
            }
        }
        for _ in 0..<Self.reach { try use(newRecord()) }
        // Entries 1 to 4, the oldest within reach. Then each new entry pushes the oldest out.
        for index in [0, 1, 2, 3] { try use(listed[index]) }
        #expect(byNumber == 4 && listed.count == Self.reach)
        try use(newRecord())
        try use(listed[0])
        #expect(listed.count == Self.reach + 2, "entry 1 was out of reach: listed again")
        try use(listed[2])
        #expect(byNumber == 5, "entry 3 is still within reach")
        #expect(throws: DecodeError.self) { try table.record(number: 2) }
        #expect(try table.record(number: 3) == listed[2])
        try use(listed[1])
        #expect(listed.count == Self.reach + 3, "entry 2 was out of reach: listed again")
        #expect(throws: DecodeError.self) { try table.record(number: UInt64(Self.reach + 4)) }
    }

    /// A writer of format 6 starts a record table in each block and a writer of format 7 goes on
    /// with the bundle's, and `BundleReader` reads each as its format says: a note of 1 MiB is a
    /// block of its own, between operations on the same records.
    @Test(arguments: [UInt8(6), 7])
    func aBundleReaderKeepsTheTableItsFormatSays(format: UInt8) throws {
        let long = String(repeating: "All work and no play. ", count: 50_000)
        let operations = [
            Columns.op(Columns.a, 1, 100, Columns.milk, .assign(.title, .string("Buy milk"))),
            Columns.op(Columns.a, 2, 101, Columns.ideas, .assign(.title, .string("Ideas"))),
            Columns.op(Columns.a, 3, 102, Columns.ideas, .assign(.body, .string(long))),
            Columns.op(Columns.a, 4, 103, Columns.future, .assign(.other(ExactString("colour")), .string("teal"))),
            Columns.op(Columns.a, 5, 104, Columns.milk, .assign(.title, .string("Buy oat milk"))),
            Columns.op(Columns.a, 6, 105, Columns.future, .assign(.other(ExactString("colour")), .string("green"))),
        ]
        var bytes: [UInt8] = []
        let manifest = BundleManifest(publisher: Columns.a, createdMillis: 1, base: VersionVector(), top: VersionVector([Columns.a: 6]))
        var writer = try BundleWriter(manifest: manifest, format: format) { bytes += $0 }
        for operation in operations { try writer.append(operation) }
        _ = try writer.finish()
        var reader = BundleReader(MemorySource(bytes))
        var read: [Op] = []
        try reader.forEachOperation { read.append($0) }
        let same = read == operations  // not the operands, with their text of 1 MiB, if they differ
        #expect(same, "\(read.map(\.record))")

        let payloads = try BundleTests.rawPayloads(bytes)
        #expect(payloads.count == 3)
        let last = try Columns.parts(payloads[2]).columns
        if format == 6 {
            // A table of its own: the record of kind 9 and milk listed, the first named again as #1.
            #expect(last[3] == [0, 0, 1])
            #expect(Self.refusal([payloads[2]], reach: .block) == nil)
        } else {
            // The bundle's: the record of kind 9 listed as #3, its time a delta from the first
            // block's last entry, and milk named as #1 of the first block. Read alone, the block
            // is refused at its first entry's time.
            #expect(last[3] == [0, 1, 3])
            let refusal = Self.refusal([payloads[2]], reach: .bundle)
            #expect(refusal?.contains("a record id's first six bytes out of range") == true, "\(refusal ?? "read")")
        }
    }

    /// The fuzz corpus's seed of format 7 cut into blocks has a third block that names by number a
    /// record its first listed.
    @Test func theFuzzSeedCutIntoBlocksNamesAcrossThem() throws {
        let payloads = try BundleTests.rawPayloads(try FuzzCorpus.blocksCutAsTheyWere())
        #expect(payloads.count == 3)
        #expect(try Self.decode(payloads, reach: .bundle).count == 7)
        #expect(Self.refusal([payloads[2]], reach: .bundle)?.contains("of a bundle that named 0 so far") == true)
    }
}
