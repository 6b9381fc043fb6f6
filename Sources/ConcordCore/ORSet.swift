/// The state of one tag in an add-wins observed-remove set.
///
/// Every add carries a unique dot (the id of its operation). A remove names the dots it observed
/// and removes exactly those; an add the remover had not seen survives, so a concurrent add and
/// remove leave the tag present ("add wins"), and re-adding after a remove works.
///
/// `live` holds the dots added and not removed; `removed` every dot any remove has named, kept
/// so that an add delivered after its remove does not resurrect the tag. Both are pure functions
/// of the set of operations applied, so the state is the same whatever the delivery order:
/// - Commutative, associative and idempotent, as unions of dot sets are.
public struct TagState: Hashable, Sendable {
    public private(set) var live: Set<OperationID>
    public private(set) var removed: Set<OperationID>

    public init(live: Set<OperationID> = [], removed: Set<OperationID> = []) {
        self.live = live.subtracting(removed)
        self.removed = removed
    }

    public var isPresent: Bool { !live.isEmpty }

    public mutating func add(_ dot: OperationID) {
        if !removed.contains(dot) { live.insert(dot) }
    }

    public mutating func remove(_ dots: some Sequence<OperationID>) {
        for dot in dots {
            removed.insert(dot)
            live.remove(dot)
        }
    }

    public mutating func merge(_ other: TagState) {
        removed.formUnion(other.removed)
        live.formUnion(other.live)
        live.subtract(removed)
    }
}

/// An add-wins OR-set of tags.
public struct TagSet: Hashable, Sendable {
    public private(set) var tags: [ExactString: TagState]

    public init(tags: [ExactString: TagState] = [:]) {
        self.tags = tags
    }

    /// The tags present, in UTF-8 byte order.
    public var present: [ExactString] {
        tags.compactMap { $0.value.isPresent ? $0.key : nil }.sorted()
    }

    public func contains(_ tag: ExactString) -> Bool { tags[tag]?.isPresent ?? false }

    /// The dots of `tag` that a remove issued now would observe.
    public func liveDots(of tag: ExactString) -> [OperationID] {
        (tags[tag]?.live).map { $0.sorted() } ?? []
    }

    public mutating func add(_ tag: ExactString, dot: OperationID) {
        tags[tag, default: TagState()].add(dot)
    }

    public mutating func remove(_ tag: ExactString, observed: [OperationID]) {
        tags[tag, default: TagState()].remove(observed)
    }

    public mutating func merge(_ other: TagSet) {
        for (tag, state) in other.tags {
            tags[tag, default: TagState()].merge(state)
        }
    }
}
