import ConcordCore
import ConcordWire
import Testing

/// Which records a block of columns names by number (SPEC.md §13, "The record table"): in format 6
/// those it named itself, in format 7 the last 131,072 its bundle named, in it or in the blocks
/// before it.
@Suite struct RecordReachTests {
    typealias Columns = OperationColumnsTests
    static let reach = OperationColumns.Reach.bundleNames

    /// Decodes `payloads` as the blocks of one bundle, each going on from the names of the one
    /// before.
    static func decode(_ payloads: [[UInt8]], reach: OperationColumns.Reach) throws -> [Op] {
        var names = OperationColumns.RecordTable(reach: reach)
        var decoded: [Op] = []
        for payload in payloads {
            var cursor = try OperationsBlock.Cursor(payload, layout: .columns, names: names)
            while let operation = try cursor.next() { decoded.append(operation) }
            names = cursor.names!
            names.endBlock()
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

    @Test func format7NamesByNumberARecordThatAnEarlierBlockNamed() throws {
        let perBundle = Self.payloads(Self.first, Self.second, reach: .bundle)
        #expect(try Self.decode(perBundle, reach: .bundle) == Columns.operations)
        // The second block names no record by its id: both were named in the first.
        let (_, columns) = try Columns.parts(perBundle[1])
        #expect(columns[4].isEmpty && columns[6].isEmpty, "\(columns[4]), \(columns[6])")
        #expect(columns[3] == [1, 2, 1], "milk is the first record the bundle named, ideas the second")

        // Format 6's second block names them again by their ids, and each block stands alone.
        let perBlock = Self.payloads(Self.first, Self.second, reach: .block)
        #expect(try Self.decode(perBlock, reach: .block) == Columns.operations)
        #expect(try Columns.parts(perBlock[1]).columns[4].count == 2)
        #expect(perBundle[1].count + 2 * 10 < perBlock[1].count)

        // Read alone, or as a block of format 6, the second block of format 7 names what nothing named.
        #expect(Self.refusal([perBundle[1]], reach: .bundle)?.contains("record #1 of a bundle that named 0 so far") == true)
        #expect(Self.refusal(perBundle, reach: .block)?.contains("record #1 of a block that named 0 so far") == true)
    }

    /// One operation on each of 131,073 records, then on the first and the third again: the first
    /// is out of reach, and is named again by its id; the third is named by its number.
    @Test func aRecordOutOfReachIsNamedAgainByItsId() throws {
        let records = (1...Self.reach + 1).map { RecordRef(kind: .note, id: RecordID(high: 0x0123_4567 << 16, low: UInt64($0))) }
        let first = records.enumerated().map { Columns.op(Columns.a, UInt64($0.offset + 1), 100, $0.element, .assign(.pinned, .bool(true))) }
        let second = [records[0], records[2]].enumerated().map {
            Columns.op(Columns.a, UInt64(records.count + $0.offset + 1), 101, $0.element, .assign(.pinned, .bool(false)))
        }
        let payloads = Self.payloads(first, second, reach: .bundle)
        #expect(try Self.decode(payloads, reach: .bundle) == first + second)
        let (head, columns) = try Columns.parts(payloads[1])
        #expect(columns[3] == [0, 3], "the first record named anew, the third by its number")
        #expect(columns[4] == [RecordKind.note.rawValue])

        // A block that names the first record by its number names it out of reach.
        var outOfReach = columns
        outOfReach[3] = [1, 3]
        let damaged = [payloads[0], Columns.assemble(head, outOfReach)]
        #expect(
            Self.refusal(damaged, reach: .bundle)?.contains("record #1 of a bundle that named 131073 so far, more than 131072 names back") == true)
    }

    /// The writer's numbers and the reader's table agree at every name, past the reach's end.
    @Test func theTablesAgreeAcrossTheReach() throws {
        var numbers = OperationColumns.RecordNumbers(reach: .bundle)
        var table = OperationColumns.RecordTable(reach: .bundle)
        func record(_ index: Int) -> RecordRef { RecordRef(kind: .reminder, id: RecordID(high: 1, low: UInt64(index % 150_000))) }
        for index in 0..<(2 * Self.reach + 10) {
            let record = record(index)
            if let number = numbers.number(orNaming: record) {
                #expect(try table.record(number: UInt64(number)) == record)
            } else {
                table.name(record)
            }
        }
        // 150,000 records named, then the first 112,154 of them again, each out of reach by then:
        // 262,154 names, of which the last 131,072 (from #131,083) are within reach.
        func number(of record: RecordRef) -> Int? {
            var probe = numbers
            return probe.number(orNaming: record)
        }
        #expect(number(of: record(0)) == 150_001)
        #expect(try table.record(number: 150_001) == record(0))
        #expect(number(of: record(120_000)) == nil, "named #120001 only")
        #expect(number(of: record(131_082)) == 131_083)
        #expect(try table.record(number: 131_083) == record(131_082))
        #expect(throws: DecodeError.self) { try table.record(number: 131_082) }
        #expect(throws: DecodeError.self) { try table.record(number: 262_155) }
    }
}
