/// The columns of an operations block of bundle formats 6 and 7 (SPEC.md §13, "Operations
/// payload"): the parts of its entries (§8.3) sorted by kind, so that zstd finds texts beside texts
/// and timestamps beside timestamps, with each record's id written once per block (format 6) or
/// at most once in any 131,072 entries of its bundle's record table (format 7; `RecordNumbers.swift`).
package enum OperationColumns {
    /// The columns, in the order a payload holds them.
    enum Column: Int, CaseIterable {
        case headers, compacted, timestamps, records, recordKinds, recordIDTimes, recordIDRests, fields, tags, ids
        /// The first of the value columns, one per field code 0 to 10 (§6); the text columns follow.
        case values

        /// Its name in errors, as SPEC.md §13 gives it.
        var name: String {
            ["headers", "compacted seqs", "timestamps", "records", "record kinds", "record ids' first six bytes",
             "record ids' last ten bytes", "fields", "tags", "operation ids"][rawValue]
        }
    }

    /// Field codes 0 (a field by name) to 10 each have a column of values and one of texts. A new
    /// field code needs a new format: its values would have no column.
    static let fieldCodes = Int(Field.maxKnownCode) + 1
    /// How many columns a payload holds: 32.
    package static let count = Column.values.rawValue + 2 * fieldCodes

    /// The name of column `index` in errors.
    static func name(_ index: Int) -> String {
        let values = Column.values.rawValue
        if index >= values + fieldCodes { return "texts of field code \(index - values - fieldCodes)" }
        if index >= values { return "values of field code \(index - values)" }
        return Column(rawValue: index)!.name
    }

    /// Reads the entries' parts from their columns: what `OperationCodec.RunDecoder` decodes a
    /// block's runs from.
    package struct Reader: OperationParts {
        private var headers, compacted, timestamps, records, recordKinds, recordIDTimes, recordIDRests, fields, tags, ids: ByteReader
        /// The value and the text columns, indexed by field code.
        private var values: [ByteReader]
        private var texts: [ByteReader]
        /// The record table: the block's, or in format 7 its bundle's.
        package private(set) var table: RecordsByNumber

        /// Reads the columns' lengths from `reader`, which is left past the last column.
        /// - Parameter table: the record table before the block: empty in format 6, and in format 7
        ///   that of its bundle's blocks before it.
        package init(from reader: inout ByteReader, table: RecordsByNumber) throws(DecodeError) {
            self.table = table
            var columns: [ByteReader] = []
            columns.reserveCapacity(OperationColumns.count)
            for index in 0..<OperationColumns.count {
                let length = try reader.varint()
                guard length <= UInt64(reader.remaining) else {
                    throw .malformed("the \(OperationColumns.name(index)) column of \(length) bytes, past the payload's end")
                }
                let start = reader.offset
                _ = try reader.bytes(Int(length))
                columns.append(ByteReader(reader.bytes, range: start..<reader.offset))
            }
            (headers, compacted, timestamps, records) = (columns[0], columns[1], columns[2], columns[3])
            (recordKinds, recordIDTimes, recordIDRests) = (columns[4], columns[5], columns[6])
            (fields, tags, ids) = (columns[7], columns[8], columns[9])
            let firstValues = Column.values.rawValue
            values = Array(columns[firstValues..<firstValues + OperationColumns.fieldCodes])
            texts = Array(columns[(firstValues + OperationColumns.fieldCodes)...])
        }

        /// Checks that every column was read to its end, once every run was.
        package func checkEnd() throws(DecodeError) {
            let all = [headers, compacted, timestamps, records, recordKinds, recordIDTimes, recordIDRests, fields, tags, ids] + values + texts
            for (index, column) in all.enumerated() where !column.isAtEnd {
                throw .malformed("\(column.remaining) bytes left in the \(OperationColumns.name(index)) column")
            }
        }

        func peekHeader() -> UInt8? { headers.peek() }
        mutating func header() throws(DecodeError) -> UInt8 { try headers.byte() }
        mutating func compactedCount() throws(DecodeError) -> UInt64 { try compacted.varint() }
        mutating func timestampDelta() throws(DecodeError) -> Int64 { try timestamps.signedVarint() }

        mutating func record() throws(DecodeError) -> RecordRef {
            let reference = try records.varint()
            guard reference == 0 else { return try table.record(number: reference) }
            let kind = RecordKind(rawValue: try recordKinds.byte())
            guard kind.rawValue != 0 else { throw .malformed("record kind 0") }
            let (time, overflow) = table.previousTime.addingReportingOverflow(try recordIDTimes.signedVarint())
            guard !overflow, time >= 0, time < 1 << 48 else { throw .malformed("a record id's first six bytes out of range") }
            table.previousTime = time
            let seventh = UInt64(try recordIDRests.byte())
            let eighth = UInt64(try recordIDRests.byte())
            let record = RecordRef(kind: kind, id: RecordID(high: UInt64(time) << 16 | seventh << 8 | eighth, low: try recordIDRests.fixed64()))
            table.list(record)
            return record
        }

        mutating func fieldCode() throws(DecodeError) -> UInt8 { try fields.byte() }
        mutating func fieldName() throws(DecodeError) -> String { try fields.string() }

        mutating func value(code: UInt8) throws(DecodeError) -> Value {
            // The field's code was checked first; this guards the columns' indices all the same.
            guard code <= Field.maxKnownCode else { throw .malformed("unknown field code \(code)") }
            let code = Int(code)
            switch try values[code].byte() {
            case 0: return .null
            case 1: return .bool(false)
            case 2: return .bool(true)
            case 3: return .int(try values[code].signedVarint())
            case 4: return .string(try texts[code].string(ofLength: try values[code].varint()))
            case let tag: throw .malformed("unknown value type \(tag)")
            }
        }

        mutating func tag() throws(DecodeError) -> String { try tags.string() }

        mutating func ids<T>(_ body: (inout ByteReader) throws(DecodeError) -> T) throws(DecodeError) -> T {
            try body(&ids)
        }
    }

    /// Writes the entries' parts into their columns: what `OperationCodec.RunEncoder` encodes a
    /// block's runs into.
    package struct Writer: OperationPartsWriter {
        private var columns = [ByteWriter](repeating: ByteWriter(), count: OperationColumns.count)
        /// The record table: the block's, or in format 7 its bundle's.
        private var table: NumbersByRecord

        package init(reach: Reach) {
            table = NumbersByRecord(reach: reach)
        }

        /// The bytes the columns hold, without their lengths.
        package private(set) var bytes = 0

        private mutating func write(_ column: Column, _ body: (inout ByteWriter) -> Void) {
            write(column.rawValue, body)
        }

        private mutating func write(_ index: Int, _ body: (inout ByteWriter) -> Void) {
            let before = columns[index].bytes.count
            body(&columns[index])
            bytes += columns[index].bytes.count - before
        }

        mutating func header(_ header: UInt8) { write(.headers) { $0.byte(header) } }
        mutating func compactedCount(_ count: UInt64) { write(.compacted) { $0.varint(count) } }
        mutating func timestampDelta(_ delta: Int64) { write(.timestamps) { $0.signedVarint(delta) } }

        mutating func record(_ record: RecordRef) {
            if let number = table.number(orListing: record) {
                write(.records) { $0.varint(UInt64(number)) }
                return
            }
            write(.records) { $0.varint(0) }
            write(.recordKinds) { $0.byte(record.kind.rawValue) }
            // Concord's ids start with a time in milliseconds (SPEC.md §2): ids made one after
            // the other differ there by little, and the rest is random.
            let time = Int64(record.id.high >> 16)
            let delta = time - table.previousTime
            write(.recordIDTimes) { $0.signedVarint(delta) }
            table.previousTime = time
            write(.recordIDRests) {
                $0.byte(UInt8(truncatingIfNeeded: record.id.high >> 8))
                $0.byte(UInt8(truncatingIfNeeded: record.id.high))
                $0.fixed64(record.id.low)
            }
        }

        package mutating func field(_ field: Field) {
            write(.fields) { column in
                column.byte(field.code)
                if case .other(let name) = field { column.string(name.string) }
            }
        }

        mutating func value(_ value: Value, code: UInt8) {
            let column = Column.values.rawValue + Int(code)
            switch value {
            case .null: write(column) { $0.byte(0) }
            case .bool(false): write(column) { $0.byte(1) }
            case .bool(true): write(column) { $0.byte(2) }
            case .int(let integer):
                write(column) {
                    $0.byte(3)
                    $0.signedVarint(integer)
                }
            case .string(let text):
                write(column) {
                    $0.byte(4)
                    $0.varint(UInt64(text.utf8.count))
                }
                write(column + OperationColumns.fieldCodes) { $0.bytes(text.utf8) }
            }
        }

        mutating func tag(_ tag: String) { write(.tags) { $0.string(tag) } }
        mutating func ids(_ ids: [OperationID]) { write(.ids) { $0.ids(ids) } }

        /// Every column, each after its length, in the order of a payload, and empties the writer
        /// (in format 7 it keeps the record table, for the bundle's next block): the parts are
        /// handed over as they are, not copied into one array.
        package mutating func finish() -> [[UInt8]] {
            var parts: [[UInt8]] = []
            parts.reserveCapacity(2 * columns.count)
            for column in columns {
                var length = ByteWriter()
                length.varint(UInt64(column.bytes.count))
                parts += [length.bytes, column.bytes]
            }
            columns = [ByteWriter](repeating: ByteWriter(), count: OperationColumns.count)
            table.endBlock()
            bytes = 0
            return parts
        }
    }
}
