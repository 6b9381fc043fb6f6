import ConcordCore
import Foundation
import GRDB

/// A reminder or note that an import creates (SPEC.md §10, "Import form"): its values given as
/// the actions that write them (assigns and tag adds), written as they are.
package struct NewRecord: Sendable {
    /// `.reminder` or `.note`.
    package var kind: RecordKind
    /// Its id; nil to make one as for a new record.
    package var id: RecordID?
    /// Assigns and tag adds, in the order they are written.
    package var actions: [Action]

    package init(kind: RecordKind, id: RecordID?, actions: [Action]) {
        precondition(RecordTable.of(kind) != nil, "an import creates reminders and notes")
        self.kind = kind
        self.id = id
        self.actions = actions
    }
}

/// What an import did with one record.
package enum ImportOutcome: Hashable, Sendable {
    /// Created, under this reference.
    case created(RecordRef)
    /// Left as it was: the store holds a record of its kind under its id.
    case held
}

extension ConcordStore {
    /// How many records an import creates before it writes them out: what it holds in memory.
    static let importRecordsPerFlush = 1000

    /// Creates records as local writes, all in one transaction: `read` passes each to `create`,
    /// which writes it, or leaves it if the store holds a record of its kind under its id
    /// (`.held`). The records held are found in the transaction that writes, so two imports of
    /// one file at once create each record once. Unlike a create of §7, which checks what a user
    /// types, the values are written as given (an empty title, any tag, any priority, any
    /// snooze): what every operation must be is checked (`Change.check`).
    ///
    /// The records are written out a thousand at a time, so memory stays flat however many
    /// `read` passes. If `read` throws, or `create` refuses a record (an id the store holds under
    /// another kind, SPEC.md §2; a value of the wrong type or too long), nothing is written, and
    /// `read`'s error (or the refusal, if `read` passes it on) is thrown as a `ConcordError`, of
    /// code `invalidInput` for an `InvalidInputError`.
    package func importRecords(_ read: (_ create: (NewRecord) throws -> ImportOutcome) throws -> Void) throws(ConcordError) {
        let now = environment.wallClock()
        var created = false
        try guarded {
            try write { db in
                try prepareWrite(db)
                var context = try WriteContext(db, localReplica: replicaID)
                var unwritten = 0
                try read { record in
                    let ref = RecordRef(kind: record.kind, id: record.id ?? environment.makeRecordID())
                    if try context.holds(ref) { return .held }
                    if let other = try context.otherKind(holdingIDOf: ref) { throw ConcordError.idOfAnotherKind(ref, heldAs: other) }
                    do {
                        try Change.check(record.actions)
                    } catch let error as ChangeError {
                        throw ConcordError(.invalidChange, error.description, cause: error)
                    }
                    for action in record.actions {
                        let predecessors: Predecessors?
                        switch action {
                        // A new record's registers are empty: its writes have seen nothing.
                        case .assign: predecessors = .empty
                        case .addTag: predecessors = nil
                        case .removeTag, .purge, .elided: preconditionFailure("an import assigns and adds tags, and does nothing else")
                        }
                        try context.append(Op(
                            id: OperationID(replica: replicaID, seq: try context.nextLocalSeq()),
                            timestamp: try context.clock.tick(wallMillis: now), record: ref, action: action,
                            predecessors: predecessors))
                    }
                    created = true
                    unwritten += 1
                    if unwritten == Self.importRecordsPerFlush {
                        try context.flush()
                        unwritten = 0
                    }
                    return .created(ref)
                }
                if created { try context.flush() }
            }
        }
        if created { committed() }
    }
}
