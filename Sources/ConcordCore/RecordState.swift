/// The replicated state of one record: an LWW register per field, and an add-wins OR-set of tags.
///
/// `apply(_:)` folds one operation in; `merge(_:)` joins two states. Both are commutative,
/// associative and idempotent, so any replica that has applied the same set of operations, in
/// any order and any number of times, holds an equal `RecordState`.
package struct RecordState: Hashable, Sendable {
    /// The record whose state this is.
    package let ref: RecordRef
    /// The registers of the kind's known fields, in the order of `ref.kind.knownFields` (empty
    /// for kinds without known fields): a merge holds many states, so no slot is spent on a
    /// field the kind cannot have.
    package private(set) var knownRegisters: [LWWRegister?]
    /// Registers of fields this version does not know for the kind, kept and passed on.
    package private(set) var unknown: [ExactString: LWWRegister]
    /// The record's tags.
    package private(set) var tags: TagSet
    /// The ids of the operations applied to it: where its history lies in the log.
    package private(set) var operations: OperationSpans
    /// Whether a purge (or an elided operation, which stands for one) was applied: the record's
    /// content is erased, and no operation brings it back (SPEC.md §5.7).
    package private(set) var isPurged = false

    /// The state of a record no operation has touched: no register written, no tag.
    package init(ref: RecordRef) {
        self.ref = ref
        let count = ref.kind.knownFieldCount
        knownRegisters = count == 0 ? [] : Array(repeating: nil, count: count)
        unknown = [:]
        tags = TagSet()
        operations = OperationSpans()
    }

    /// Rebuilds a state from its parts as a store keeps them: the registers of known fields in
    /// the order of `ref.kind.knownFields` (extra ones are ignored), and the unknown fields by name.
    package init(
        ref: RecordRef, knownRegisters: [LWWRegister?], unknown: [ExactString: LWWRegister], tags: TagSet,
        operations: OperationSpans = OperationSpans()
    ) {
        self.ref = ref
        let count = ref.kind.knownFieldCount
        if knownRegisters.count == count {
            self.knownRegisters = knownRegisters
        } else {
            var slots = [LWWRegister?](repeating: nil, count: count)
            for slot in 0..<min(knownRegisters.count, count) { slots[slot] = knownRegisters[slot] }
            self.knownRegisters = slots
        }
        self.unknown = [:]
        self.tags = tags
        self.operations = operations
        for (name, register) in unknown { write(.other(name), register) }
    }

    /// Rebuilds a state from its parts (used by stores that persist states).
    package init(ref: RecordRef, registers: [Field: LWWRegister], tags: TagSet) {
        self.init(ref: ref)
        for (field, register) in registers { write(field, register) }
        self.tags = tags
    }

    /// Folds one operation in: an assign into its field's register, a tag operation into `tags`.
    /// A purged record takes in no content.
    package mutating func apply(_ operation: Op) {
        operations.insert(operation.id)
        guard !isPurged else { return }
        switch operation.action {
        case let .assign(field, value):
            write(field, LWWRegister(value: value, stamp: operation.stamp, predecessors: operation.predecessors))
        case let .addTag(tag):
            tags.add(tag, dot: operation.id)
        case let .removeTag(tag, observed):
            tags.remove(tag, observed: observed)
        case .purge, .elided:
            purge()
        }
    }

    /// Forgets the removed dots of its tags that `forget` names (SPEC.md §5.8, "Stable removes").
    package mutating func forgetRemoved(where forget: (OperationID) -> Bool) {
        tags.forgetRemoved(where: forget)
    }

    /// The field of a `replica` record that retires it, carried by name (SPEC.md §5.8).
    package static let retiredField = Field.other("retired")

    /// Whether this is a `replica` record that retires its replica: its `retired` register holds `true`.
    package var retires: Bool {
        ref.kind == .replica && register(Self.retiredField)?.value == .bool(true)
    }

    /// Erases every register and tag, for good: the state of a purged record is its ref, the
    /// ids of its operations and the mark, whatever operations were applied, in any order.
    package mutating func purge() {
        isPurged = true
        knownRegisters = knownRegisters.isEmpty ? [] : Array(repeating: nil, count: knownRegisters.count)
        unknown = [:]
        tags = TagSet()
    }

    /// Forgets that the operation `id` acted on the record, which compaction dropped (SPEC.md §5.8):
    /// the spans list the operations held in full.
    package mutating func forget(_ id: OperationID) {
        operations.remove(id)
    }

    /// Merges `register` into the register of `field`: the greater stamp wins.
    package mutating func write(_ field: Field, _ register: LWWRegister) {
        // A known field spelled by name is that field (validation refuses such operations; a state
        // never holds them as unknown fields either way).
        if case .other(let name) = field, case let known = Field(name: name.string), known.code != 0 {
            write(known, register)
            return
        }
        if let slot = ref.kind.slot(of: field) {
            knownRegisters[slot].merge(register)
        } else {
            let name: ExactString
            if case .other(let other) = field { name = other } else { name = ExactString(field.name) }
            unknown[name].merge(register)
        }
    }

    /// Joins another state of the same record, register by register and tag by tag.
    package mutating func merge(_ other: RecordState) {
        precondition(other.ref == ref, "merging states of different records")
        operations.formUnion(other.operations)
        guard !isPurged else { return }
        guard !other.isPurged else {
            purge()
            return
        }
        for (slot, register) in other.knownRegisters.enumerated() {
            if let register { knownRegisters[slot].merge(register) }
        }
        for (name, register) in other.unknown {
            unknown[name].merge(register)
        }
        tags.merge(other.tags)
    }

    /// The register of `field`; nil if it was never written.
    package func register(_ field: Field) -> LWWRegister? {
        if let slot = ref.kind.slot(of: field) { return knownRegisters[slot] }
        return unknown[ExactString(field.name)]
    }

    /// The current value of a field; `.null` when it was never written.
    package func value(_ field: Field) -> Value {
        register(field)?.value ?? .null
    }

    /// Whether a field is in conflict: the record is not deleted and some field's register has
    /// more than one head (SPEC.md §5.1, §10). A deleted record's heads are kept, and are in
    /// conflict again once it is restored.
    package var inConflict: Bool {
        !isDeleted && knownRegisters.contains { $0?.inConflict ?? false } || unknown.values.contains { $0.inConflict }
    }

    /// Whether the `deleted` register holds `true` (SPEC.md §5.3).
    package var isDeleted: Bool { value(.deleted).boolValue ?? false }

    /// Every register with its field, known fields first in code order, then unknown ones by name.
    package var registers: [(field: Field, register: LWWRegister)] {
        var result: [(Field, LWWRegister)] = []
        for code in 1...Field.maxKnownCode {
            if let field = Field(code: code), let slot = ref.kind.slot(of: field), let register = knownRegisters[slot] {
                result.append((field, register))
            }
        }
        for name in unknown.keys.sorted() {
            result.append((.other(name), unknown[name]!))
        }
        return result
    }
}
