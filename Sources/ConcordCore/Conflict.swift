/// A field whose register has more than one head: writes made without seeing each other
/// (SPEC.md §5.1, "Heads and conflicts"). The value shown is the winner's; the others are kept
/// until a write that has seen them all settles the field.
public struct Conflict: Hashable, Sendable {
    /// The record.
    public var record: RecordRef
    /// The field.
    public var field: Field
    /// The competing writes: the winner first, then the others by stamp, greatest first.
    public var heads: [LWWRegister.Write]

    /// The conflict of `field` of `record` between `heads`.
    public init(record: RecordRef, field: Field, heads: [LWWRegister.Write]) {
        self.record = record
        self.field = field
        self.heads = heads
    }
}

extension RecordState {
    /// The fields in conflict, known fields in code order then unknown ones by name; none for a
    /// deleted record, whose fields cannot be edited until it is restored.
    package var conflicts: [Conflict] {
        guard !isDeleted else { return [] }
        return registers.filter { $0.register.inConflict }.map { Conflict(record: ref, field: $0.field, heads: $0.register.heads) }
    }
}

/// One operation in a record's history (SPEC.md §10, "History"), and whether it holds now.
public struct HistoryEntry: Hashable, Sendable {
    /// What it holds to now.
    public enum Standing: String, Hashable, Sendable {
        /// An assign that is its register's winner; an add whose tag it keeps present; a remove
        /// whose tag is absent.
        case holds
        /// An assign that is a head but not the winner, of a record that is not deleted: in
        /// conflict with it.
        case inConflict = "conflict"
        /// Anything else: overwritten, undone, or a head of a deleted record that is not the winner.
        case superseded
    }

    /// The operation.
    public var operation: Op
    /// Whether it holds now.
    public var standing: Standing

    /// `operation`, standing as `standing`.
    public init(operation: Op, standing: Standing) {
        self.operation = operation
        self.standing = standing
    }
}

extension RecordState {
    /// How `operation`, one of this record's, stands in this state.
    package func standing(of operation: Op) -> HistoryEntry.Standing {
        switch operation.action {
        case let .assign(field, _):
            guard let register = register(field) else { return .superseded }
            if register.stamp == operation.stamp { return .holds }
            return !isDeleted && register.rivals.contains { $0.stamp == operation.stamp } ? .inConflict : .superseded
        case let .addTag(tag):
            return tags.liveDots(of: tag).contains(operation.id) ? .holds : .superseded
        case let .removeTag(tag, _):
            return tags.contains(tag) ? .superseded : .holds
        case .purge, .elided:
            return .holds
        }
    }
}
