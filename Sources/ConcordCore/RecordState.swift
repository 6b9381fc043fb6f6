/// The replicated state of one record: an LWW register per field, and an add-wins OR-set of tags.
///
/// `apply(_:)` folds one operation in; `merge(_:)` joins two states. Both are commutative,
/// associative and idempotent, so any replica that has applied the same set of operations, in
/// any order and any number of times, holds an equal `RecordState`.
public struct RecordState: Hashable, Sendable {
    public let ref: RecordRef
    /// The registers of the kind's known fields, indexed by `Field.code`.
    public private(set) var known: [LWWRegister?]
    /// Registers of fields this version does not know for the kind, kept and passed on.
    public private(set) var unknown: [ExactString: LWWRegister]
    public private(set) var tags: TagSet

    public init(ref: RecordRef) {
        self.ref = ref
        known = Array(repeating: nil, count: Int(Field.maxKnownCode) + 1)
        unknown = [:]
        tags = TagSet()
    }

    /// Rebuilds a state from its parts as a store keeps them: the registers of known fields by
    /// `Field.code` (ignored for kinds without known fields), and the unknown fields by name.
    public init(ref: RecordRef, known: [LWWRegister?], unknown: [ExactString: LWWRegister], tags: TagSet) {
        self.init(ref: ref)
        for code in 1..<min(known.count, self.known.count) where known[code] != nil {
            if let field = Field(code: UInt8(code)), ref.kind.knows(field) { self.known[code] = known[code] }
        }
        for (name, register) in unknown { write(.other(name), register) }
        self.tags = tags
    }

    /// Rebuilds a state from its parts (used by stores that persist states).
    public init(ref: RecordRef, registers: [Field: LWWRegister], tags: TagSet) {
        self.init(ref: ref)
        for (field, register) in registers { write(field, register) }
        self.tags = tags
    }

    public mutating func apply(_ operation: Op) {
        switch operation.action {
        case let .assign(field, value):
            write(field, LWWRegister(value: value, stamp: operation.stamp))
        case let .addTag(tag):
            tags.add(tag, dot: operation.id)
        case let .removeTag(tag, observed):
            tags.remove(tag, observed: observed)
        }
    }

    public mutating func write(_ field: Field, _ register: LWWRegister) {
        // A known field spelled by name is that field (validation refuses such operations; a state
        // never holds them as unknown fields either way).
        if case .other(let name) = field, case let known = Field(name: name.string), known.code != 0 {
            write(known, register)
            return
        }
        if ref.kind.knows(field) {
            known[Int(field.code)].merge(register)
        } else {
            let name: ExactString
            if case .other(let other) = field { name = other } else { name = ExactString(field.name) }
            unknown[name].merge(register)
        }
    }

    public mutating func merge(_ other: RecordState) {
        precondition(other.ref == ref, "merging states of different records")
        for (code, register) in other.known.enumerated() {
            if let register { known[code].merge(register) }
        }
        for (name, register) in other.unknown {
            unknown[name].merge(register)
        }
        tags.merge(other.tags)
    }

    public func register(_ field: Field) -> LWWRegister? {
        if ref.kind.knows(field) { return known[Int(field.code)] }
        return unknown[ExactString(field.name)]
    }

    /// The current value of a field; `.null` when it was never written.
    public func value(_ field: Field) -> Value {
        register(field)?.value ?? .null
    }

    public var isDeleted: Bool { value(.deleted).boolValue ?? false }

    /// Every register with its field, known fields first in code order, then unknown ones by name.
    public var registers: [(field: Field, register: LWWRegister)] {
        var result: [(Field, LWWRegister)] = []
        for (code, register) in known.enumerated() {
            if let register, let field = Field(code: UInt8(code)) { result.append((field, register)) }
        }
        for name in unknown.keys.sorted() {
            result.append((.other(name), unknown[name]!))
        }
        return result
    }
}
