extension OperationColumns {
    /// Which records an operation may name by number in the records column (SPEC.md §13, column
    /// 3): a record named before it is named again by its number, anything else by its kind and id.
    package enum Reach: Sendable {
        /// Bundle format 6: the records its block named. Each block names its records afresh.
        case block
        /// Bundle format 7: the last 131,072 records its bundle named, in its block or in the
        /// blocks before it. A record updated long after it was created, in a later block, is then
        /// named by a number of a few bytes rather than by its 17 (most of them random), while a
        /// reader's table stays bounded.
        case bundle

        /// How many of the last records its bundle named a block of format 7 may name by number.
        package static let bundleNames = 131_072

        /// How many of the last records named may be named by number.
        var names: Int { self == .block ? .max : Self.bundleNames }

        /// Where the record named `number`-th (from 0) sits in a table of the last `names`: 131,072
        /// is a power of two, so a mask rather than a division on every record read.
        func slot(_ number: Int) -> Int { self == .block ? number : number & (Self.bundleNames - 1) }
    }

    /// The records named so far, by their numbers: what a reader looks an operation's record up in.
    package struct RecordTable: Sendable {
        package let reach: Reach
        /// The records named within reach. With reach `.bundle` a ring: the record named n-th (from
        /// 1) sits at (n − 1) mod 131,072.
        private var records: [RecordRef] = []
        /// How many records were named so far, in the block or the bundle.
        private(set) var named = 0
        /// The first six bytes of the id of the last record named.
        var previousTime: Int64 = 0

        package init(reach: Reach) {
            self.reach = reach
        }

        /// The record named `number`-th (from 1), which must be within reach.
        package func record(number: UInt64) throws(DecodeError) -> RecordRef {
            guard number <= UInt64(named) else {
                throw .malformed("record #\(number) of a \(reach == .block ? "block" : "bundle") that named \(named) so far")
            }
            guard UInt64(named) - number < UInt64(reach.names) else {
                throw .malformed("record #\(number) of a bundle that named \(named) so far, more than \(Reach.bundleNames) names back")
            }
            return records[reach.slot(Int(number - 1))]
        }

        /// Names `record` as the next number.
        package mutating func name(_ record: RecordRef) {
            if records.count < reach.names {
                records.append(record)
            } else {
                records[reach.slot(named)] = record
            }
            named += 1
        }

        /// At a block's end: with reach `.block`, the next block names its records afresh.
        package mutating func endBlock() {
            guard reach == .block else { return }
            records.removeAll(keepingCapacity: true)
            named = 0
            previousTime = 0
        }
    }

    /// The numbers of the records named so far: what a writer names an operation's record by.
    package struct RecordNumbers: Sendable {
        package let reach: Reach
        /// The number of each record named within reach, from 1.
        private var numbers: [RecordRef: Int] = [:]
        /// With reach `.bundle`, the records named, placed as `RecordTable` places them: the one a
        /// new name pushes out of reach leaves `numbers`, so that it holds at most 131,072.
        private var ring: [RecordRef] = []
        /// How many records were named so far, in the block or the bundle.
        private(set) var named = 0
        /// The first six bytes of the id of the last record named.
        var previousTime: Int64 = 0

        package init(reach: Reach) {
            self.reach = reach
        }

        /// Once a bundle's writer has named this many records, it takes room for all 131,072 at
        /// once: its table is then not rehashed as it grows, and the storage, too large for
        /// malloc's heap, goes back to the system when it is freed. The small bundles of a shared
        /// folder's changes never take it.
        static let namesBeforeRoomForAll = 4096

        /// The number of `record` if it was named within reach; otherwise names it as the next
        /// number (its id is then written) and returns nil.
        package mutating func number(orNaming record: RecordRef) -> Int? {
            let next = named + 1
            // One probe of the table both finds the record and adds it: most records are named
            // once, and the probe of a large table is a cache miss.
            let number = { (stored: inout Int) -> Int in
                if stored == 0 { stored = next }
                return stored
            }(&numbers[record, default: 0])
            guard number == next else { return number }
            if reach == .bundle {
                if named == Self.namesBeforeRoomForAll {
                    numbers.reserveCapacity(Reach.bundleNames)
                    ring.reserveCapacity(Reach.bundleNames)
                }
                if ring.count < Reach.bundleNames {
                    ring.append(record)
                } else {
                    // The record named `Reach.bundleNames` names before this one falls out of reach.
                    let slot = reach.slot(named)
                    numbers[ring[slot]] = nil
                    ring[slot] = record
                }
            }
            named = next
            return nil
        }

        /// At a block's end: with reach `.block`, the next block names its records afresh.
        package mutating func endBlock() {
            guard reach == .block else { return }
            numbers.removeAll(keepingCapacity: true)
            named = 0
            previousTime = 0
        }
    }
}
