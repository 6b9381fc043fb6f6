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
package struct TagState: Hashable, Sendable {
    /// The dots of the adds not removed; the tag is present while there is one.
    package private(set) var live: Dots
    /// Every dot a remove has named, so that an add delivered late stays removed.
    package private(set) var removed: Dots

    /// A state with these dots; a dot in both is removed, not live.
    package init(live: some Sequence<OperationID> = Dots(), removed: some Sequence<OperationID> = Dots()) {
        self.init(live: Dots(live), removed: Dots(removed))
    }

    /// A state with these dots; a dot in both is removed, not live.
    package init(live: Dots, removed: Dots) {
        self.live = live.subtracting(removed)
        self.removed = removed
    }

    /// The state of a tag never added nor removed.
    package init() {
        live = Dots()
        removed = Dots()
    }

    /// Whether the tag is in the set: some add of it is not removed.
    package var isPresent: Bool { !live.isEmpty }

    /// Applies an addTag with dot `dot`, unless a remove has named that dot already (SPEC.md §5.2).
    package mutating func add(_ dot: OperationID) {
        if !removed.contains(dot) { live.insert(dot) }
    }

    /// Applies a removeTag that observed `dots`: each is recorded as removed and leaves `live`.
    package mutating func remove(_ dots: some Sequence<OperationID>) {
        for dot in dots {
            removed.insert(dot)
            live.remove(dot)
        }
    }

    /// Forgets the removed dots `forget` names: their adds are applied nowhere again (SPEC.md
    /// §5.8, "Stable removes").
    package mutating func forgetRemoved(where forget: (OperationID) -> Bool) {
        removed = Dots(removed.filter { !forget($0) })
    }

    /// Joins another state of the same tag: both sets of dots united, minus every removed dot.
    package mutating func merge(_ other: TagState) {
        removed.formUnion(other.removed)
        live.formUnion(other.live)
        live.subtract(removed)
    }
}

/// A set of dots (operation ids) as a sorted array without repeats: a tag holds one or two dots,
/// and such an array is far cheaper to build, copy and compare than a hash set.
package struct Dots: Hashable, Sendable, Sequence, ExpressibleByArrayLiteral {
    /// The dots, in ascending order.
    package private(set) var sorted: [OperationID]

    /// No dots.
    package init() {
        sorted = []
    }

    /// The dots of `dots`, sorted, each once.
    package init(_ dots: some Sequence<OperationID>) {
        if let dots = dots as? Dots {
            self = dots
            return
        }
        var sorted = Array(dots)
        if !sorted.isEmpty {
            sorted.sort()
            var kept = 1
            for index in 1..<sorted.count where sorted[index] != sorted[kept - 1] {
                sorted[kept] = sorted[index]
                kept += 1
            }
            sorted.removeLast(sorted.count - kept)
        }
        self.sorted = sorted
    }

    /// The dots of `array`; taken as they are when already ascending without repeats, as a
    /// stored tag's are.
    package init(_ array: [OperationID]) {
        var ascending = true
        for index in array.indices.dropFirst() where !(array[index - 1] < array[index]) {
            ascending = false
            break
        }
        self.init(ascending: array)
        if !ascending { self = Dots(array.lazy) }
    }

    private init(ascending: [OperationID]) {
        sorted = ascending
    }

    /// The dots listed, sorted, each once.
    package init(arrayLiteral dots: OperationID...) {
        self.init(dots)
    }

    /// Whether there is no dot.
    package var isEmpty: Bool { sorted.isEmpty }
    /// How many dots there are.
    package var count: Int { sorted.count }

    /// Iterates over the dots in ascending order.
    package func makeIterator() -> IndexingIterator<[OperationID]> {
        sorted.makeIterator()
    }

    /// Where `dot` is, or would be inserted.
    private func position(of dot: OperationID) -> Int {
        var low = 0
        var high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle] < dot { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Whether `dot` is in the set, by binary search.
    package func contains(_ dot: OperationID) -> Bool {
        let index = position(of: dot)
        return index < sorted.count && sorted[index] == dot
    }

    /// Adds `dot` if it is missing; cheapest when it is greater than every dot held.
    package mutating func insert(_ dot: OperationID) {
        if let last = sorted.last, last < dot {
            sorted.append(dot)
            return
        }
        let index = position(of: dot)
        if index == sorted.count || sorted[index] != dot { sorted.insert(dot, at: index) }
    }

    /// Removes `dot` if it is there.
    package mutating func remove(_ dot: OperationID) {
        let index = position(of: dot)
        if index < sorted.count, sorted[index] == dot { sorted.remove(at: index) }
    }

    /// Adds every dot of `other`, merging the two sorted arrays in one pass.
    package mutating func formUnion(_ other: Dots) {
        guard !other.isEmpty else { return }
        guard !isEmpty else {
            self = other
            return
        }
        var merged: [OperationID] = []
        merged.reserveCapacity(sorted.count + other.sorted.count)
        var i = 0
        var j = 0
        while i < sorted.count, j < other.sorted.count {
            if sorted[i] < other.sorted[j] {
                merged.append(sorted[i])
                i += 1
            } else if other.sorted[j] < sorted[i] {
                merged.append(other.sorted[j])
                j += 1
            } else {
                merged.append(sorted[i])
                i += 1
                j += 1
            }
        }
        merged.append(contentsOf: sorted[i...])
        merged.append(contentsOf: other.sorted[j...])
        sorted = merged
    }

    /// Removes every dot of `other`.
    package mutating func subtract(_ other: Dots) {
        guard !isEmpty, !other.isEmpty else { return }
        sorted.removeAll { other.contains($0) }
    }

    /// The dots of either set.
    package func union(_ other: Dots) -> Dots {
        var result = self
        result.formUnion(other)
        return result
    }

    /// The dots of this set that are not in `other`.
    package func subtracting(_ other: Dots) -> Dots {
        var result = self
        result.subtract(other)
        return result
    }

    /// Whether no dot is in both sets.
    package func isDisjoint(with other: Dots) -> Bool {
        !sorted.contains { other.contains($0) }
    }
}

/// An add-wins OR-set of tags.
package struct TagSet: Hashable, Sendable {
    /// One tag the set has seen (present or not), with its state.
    package struct Entry: Hashable, Sendable {
        /// The tag, compared by its exact UTF-8 bytes.
        package let tag: ExactString
        /// Its adds and removes.
        package internal(set) var state: TagState

        /// An entry for `tag` with its state.
        package init(tag: ExactString, state: TagState) {
            self.tag = tag
            self.state = state
        }
    }

    /// Every tag seen, sorted by tag in UTF-8 byte order, each once. A record has a few tags,
    /// and a merge holds many records: a sorted array costs less to build, search and write
    /// out in order than a dictionary.
    package private(set) var entries: [Entry]

    /// An empty set: no tag seen.
    package init() {
        entries = []
    }

    /// A set with these tags and their states.
    package init(tags: [ExactString: TagState]) {
        entries = tags.map { Entry(tag: $0.key, state: $0.value) }.sorted { $0.tag < $1.tag }
    }

    /// A set of these entries; a tag listed twice has the two states merged.
    package init(entries: some Sequence<Entry>) {
        self.init()
        for entry in entries {
            // Entries in order (a stored set is written sorted) are appended as they are.
            if self.entries.last.map({ $0.tag < entry.tag }) ?? true {
                self.entries.append(entry)
            } else {
                update(entry.tag) { $0.merge(entry.state) }
            }
        }
    }

    /// Every tag seen with its state.
    package var tags: [ExactString: TagState] {
        Dictionary(uniqueKeysWithValues: entries.lazy.map { ($0.tag, $0.state) })
    }

    /// The tags present, in UTF-8 byte order.
    package var present: [ExactString] {
        entries.compactMap { $0.state.isPresent ? $0.tag : nil }
    }

    /// Whether `tag` is present.
    package func contains(_ tag: ExactString) -> Bool {
        let (index, found) = position(of: tag)
        return found && entries[index].state.isPresent
    }

    /// The dots of `tag` that a remove issued now would observe.
    package func liveDots(of tag: ExactString) -> [OperationID] {
        let (index, found) = position(of: tag)
        return found ? entries[index].state.live.sorted : []
    }

    /// The dots of `tag` that removes have named.
    package func removedDots(of tag: ExactString) -> Dots {
        let (index, found) = position(of: tag)
        return found ? entries[index].state.removed : Dots()
    }

    /// Applies an addTag of `tag` with dot `dot`.
    package mutating func add(_ tag: ExactString, dot: OperationID) {
        update(tag) { $0.add(dot) }
    }

    /// Applies a removeTag of `tag` that observed the dots `observed`.
    package mutating func remove(_ tag: ExactString, observed: [OperationID]) {
        update(tag) { $0.remove(observed) }
    }

    /// Forgets the removed dots `forget` names in every tag, and the tags left with no dot.
    package mutating func forgetRemoved(where forget: (OperationID) -> Bool) {
        for index in entries.indices { entries[index].state.forgetRemoved(where: forget) }
        entries.removeAll { $0.state.live.isEmpty && $0.state.removed.isEmpty }
    }

    /// Joins another replica's set of the same record, tag by tag (`TagState.merge(_:)`).
    package mutating func merge(_ other: TagSet) {
        for entry in other.entries {
            update(entry.tag) { $0.merge(entry.state) }
        }
    }

    /// Where `tag` is, or would be inserted.
    private func position(of tag: ExactString) -> (index: Int, found: Bool) {
        var low = 0
        var high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if entries[middle].tag < tag { low = middle + 1 } else { high = middle }
        }
        return (low, low < entries.count && entries[low].tag == tag)
    }

    /// Changes the state of `tag`, starting from an empty one if the set has not seen it.
    private mutating func update(_ tag: ExactString, _ body: (inout TagState) -> Void) {
        // Tags often arrive in order (a stored set is written sorted): try the end first.
        let index: Int
        if let last = entries.last, last.tag < tag {
            index = entries.count
        } else {
            let (position, found) = position(of: tag)
            if found {
                body(&entries[position].state)
                return
            }
            index = position
        }
        var state = TagState()
        body(&state)
        if index == entries.count {
            entries.append(Entry(tag: tag, state: state))
        } else {
            entries.insert(Entry(tag: tag, state: state), at: index)
        }
    }
}
