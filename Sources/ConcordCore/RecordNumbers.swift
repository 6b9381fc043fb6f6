extension OperationColumns {
    /// Which entries of the record table (SPEC.md §13, "The record table") an operation may name
    /// its record by, by number, in the records column; any other record it names by its kind and
    /// id, which lists it as the table's next entry.
    package enum Reach: Sendable {
        /// Bundle format 6: the entries of its own block. Each block starts a table of its own.
        case block
        /// Bundle format 7: the last 131,072 entries of its bundle's table, listed in its block or
        /// in the blocks before it. A record updated long after it was created, in a later block,
        /// is then named by a number of a few bytes rather than by its 17 (most of them random),
        /// while a reader's table stays bounded.
        case bundle

        /// How many of the last entries of its bundle's table a block of format 7 may name.
        package static let bundleEntries = 131_072

        /// How many of the last entries may be named.
        var entries: Int { self == .block ? .max : Self.bundleEntries }

        /// Where the entry of index `index` (from 0) sits in a table that keeps the last `entries`:
        /// 131,072 is a power of two, so a mask rather than a division on every record read.
        func slot(_ index: Int) -> Int { self == .block ? index : index & (Self.bundleEntries - 1) }
    }

    /// The record table as a reader keeps it: the records by their numbers.
    package struct RecordsByNumber: Sendable {
        package let reach: Reach
        /// The entries within reach. With reach `.bundle` a ring: entry n (from 1) sits at
        /// (n − 1) mod 131,072.
        private var records: [RecordRef] = []
        /// How many entries the table holds so far, in the block or the bundle: the last one's number.
        private(set) var count = 0
        /// The first six bytes of the id of the last entry (column 5's deltas go on from it).
        var previousTime: Int64 = 0

        package init(reach: Reach) {
            self.reach = reach
        }

        /// The record of entry `number` (from 1), which must be within reach.
        package func record(number: UInt64) throws(DecodeError) -> RecordRef {
            guard number <= UInt64(count) else {
                throw .malformed("record #\(number) of a \(reach == .block ? "block" : "bundle") that named \(count) so far")
            }
            guard UInt64(count) - number < UInt64(reach.entries) else {
                throw .malformed("record #\(number) of a bundle that named \(count) so far, more than \(Reach.bundleEntries) names back")
            }
            return records[reach.slot(Int(number - 1))]
        }

        /// Lists `record` as the next entry.
        package mutating func list(_ record: RecordRef) {
            if records.count < reach.entries {
                records.append(record)
            } else {
                records[reach.slot(count)] = record
            }
            count += 1
        }

        /// At a block's end: with reach `.block`, the next block starts a table of its own.
        package mutating func endBlock() {
            guard reach == .block else { return }
            records.removeAll(keepingCapacity: true)
            count = 0
            previousTime = 0
        }
    }

    /// The record table as a writer keeps it: the numbers of the records within reach.
    package struct NumbersByRecord: Sendable {
        package let reach: Reach
        /// The number (from 1) of each record within reach.
        private var numbers: [RecordRef: Int] = [:]
        /// With reach `.bundle`, the entries, placed as `RecordsByNumber` places them: the one that
        /// a new entry pushes out of reach leaves `numbers`, which so holds at most 131,072 (and,
        /// for a moment as an entry is listed, 131,073).
        private var ring: [RecordRef] = []
        /// How many entries the table holds so far, in the block or the bundle.
        private(set) var count = 0
        /// The first six bytes of the id of the last entry.
        var previousTime: Int64 = 0

        package init(reach: Reach) {
            self.reach = reach
        }

        /// Once a bundle's writer has listed this many records, it takes room for all 131,072 at
        /// once, so that its table is not rehashed as it grows (an export of N = 100,000 took 4%
        /// less time). The small bundles of a shared folder's changes never take it.
        static let entriesBeforeRoomForAll = 4096

        /// The number of `record` if it is within reach; otherwise lists it as the next entry
        /// (its kind and id are then written) and returns nil.
        package mutating func number(orListing record: RecordRef) -> Int? {
            let next = count + 1
            // One probe of the table both finds the record and adds it: most records are listed
            // once, and the probe of a large table is a cache miss.
            let number = { (stored: inout Int) -> Int in
                if stored == 0 { stored = next }
                return stored
            }(&numbers[record, default: 0])
            guard number == next else { return number }
            if reach == .bundle {
                if count == Self.entriesBeforeRoomForAll {
                    numbers.reserveCapacity(Reach.bundleEntries)
                    ring.reserveCapacity(Reach.bundleEntries)
                }
                if ring.count < Reach.bundleEntries {
                    ring.append(record)
                } else {
                    // The entry listed `Reach.bundleEntries` before this one falls out of reach.
                    let slot = reach.slot(count)
                    numbers[ring[slot]] = nil
                    ring[slot] = record
                }
            }
            count = next
            return nil
        }

        /// At a block's end: with reach `.block`, the next block starts a table of its own.
        package mutating func endBlock() {
            guard reach == .block else { return }
            numbers.removeAll(keepingCapacity: true)
            count = 0
            previousTime = 0
        }
    }
}
