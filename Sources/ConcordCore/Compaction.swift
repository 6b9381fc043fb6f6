/// Which operations a replica may drop from its log and keep only as compacted seqs (SPEC.md
/// §5.8): those whose effect the operations it keeps of the same record give anyway.
///
/// The state of a set of operations is their join (§5.6), so an operation that the kept ones make
/// redundant stays redundant beside any other operations: a replica that later holds the kept
/// ones, whatever else it holds or lacks, holds the state it would hold with the dropped one. The
/// rule is checked, not trusted: the kept operations are folded again, and nothing is dropped
/// unless they give the record's state exactly.
/// The history a compaction keeps of what it could drop (SPEC.md §5.8, "History kept"): the
/// writes of the last `newerThan` (by their timestamps, against the wall clock), and the last
/// `writesPerField` writes of each field.
public struct KeptHistory: Hashable, Sendable {
    /// Operations written less than this long before the compaction are kept; nil: none for their age.
    public var newerThan: Duration?
    /// The last this many writes of each field (by stamp, the current value's among them) are kept.
    public var writesPerField: Int

    /// Keeps the writes newer than `newerThan`, and the last `writesPerField` writes of each field.
    public init(newerThan: Duration? = nil, writesPerField: Int = 0) {
        self.newerThan = newerThan
        self.writesPerField = writesPerField
    }

    /// Nothing but what the state needs.
    public static let none = KeptHistory()
    /// The writes of the last 30 days: the default of `syncctl compact` and of the library.
    public static let thirtyDays = KeptHistory(newerThan: .seconds(30 * 86_400))

    /// `newerThan` in whole milliseconds, at most `UInt64.max`.
    var newerThanMillis: UInt64? {
        guard let newerThan else { return nil }
        let (seconds, attoseconds) = newerThan.components
        guard seconds >= 0 else { return 0 }
        let (millis, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1000)
        return overflow ? .max : millis + UInt64(attoseconds / 1_000_000_000_000_000)
    }
}

package enum Compaction {
    /// The operations of `operations` (every operation of one record a replica holds in full)
    /// that it may drop:
    /// - an assign with known predecessors that is neither a head nor hidden (§5.1): a kept
    ///   write has seen it, and the register keeps what it had seen;
    /// - an add of a tag whose dot a remove has named: the remove keeps it removed.
    /// - a remove that is **stable** (it, and every dot it names, at or below `stable`, a version
    ///   vector every replica is known to hold), with the adds it named: no replica can apply
    ///   those adds again, so the dots need no remembering.
    /// A purged record's operations are kept: they keep no content already (§5.7).
    ///
    /// Of those, `history` keeps the ones written within its age of `nowMillis`, and the last of
    /// each field's writes it counts; a stable remove is kept while an add it named is.
    package static func redundant(
        among operations: [Op], keeping history: KeptHistory = .none, nowMillis: UInt64 = 0, stable: VersionVector = VersionVector()
    ) -> Set<OperationID> {
        guard let record = operations.first?.record else { return [] }
        var state = RecordState(ref: record)
        for operation in operations { state.apply(operation) }
        guard !state.isPurged else { return [] }
        var dropped = Set<OperationID>()
        for operation in operations {
            switch operation.action {
            case let .assign(field, _):
                guard case .some = operation.predecessors, let register = state.register(field) else { continue }
                let stamp = operation.stamp
                if stamp != register.stamp, !register.rivals.contains(where: { $0.stamp == stamp }), !register.hidden.contains(stamp) {
                    dropped.insert(operation.id)
                }
            case let .addTag(tag):
                if state.tags.removedDots(of: tag).contains(operation.id) { dropped.insert(operation.id) }
            default:
                continue
            }
        }
        let ageLimit = history.keeps(nowMillis: nowMillis)
        if let since = ageLimit {
            for operation in operations where operation.timestamp.physicalMillis >= since { dropped.remove(operation.id) }
        }
        if history.writesPerField > 0 {
            var writes: [Field: [Stamp]] = [:]
            for operation in operations { if case .assign(let field, _) = operation.action { writes[field, default: []].append(operation.stamp) } }
            for stamps in writes.values {
                for stamp in stamps.sorted(by: >).prefix(history.writesPerField) { dropped.remove(OperationID(replica: stamp.replica, seq: stamp.seq)) }
            }
        }
        dropped.formUnion(stableRemoves(among: operations, dropping: dropped, stable: ageLimit, through: stable))
        // A record keeps an operation in full: a replica that receives its compacted seqs alone
        // would not know the record, whose dump shows it.
        guard !dropped.isEmpty, dropped.count < operations.count else { return [] }
        var kept = RecordState(ref: record)
        for operation in operations where !dropped.contains(operation.id) { kept.apply(operation) }
        guard kept.hasSameContent(as: state, forgettingDotsThrough: stable) else { return [] }
        return dropped
    }

    /// The removes of `operations` that are stable through `stable`, old enough for `ageLimit`,
    /// and whose named adds held in full are all in `dropping`.
    private static func stableRemoves(
        among operations: [Op], dropping: Set<OperationID>, stable ageLimit: UInt64?, through stable: VersionVector
    ) -> [OperationID] {
        guard !stable.entries.isEmpty else { return [] }
        // Made only for a record with a stable remove: most have none.
        var heldInFull: Set<OperationID>?
        return operations.compactMap { operation in
            guard case let .removeTag(_, observed) = operation.action, stable.covers(operation.id),
                  ageLimit.map({ operation.timestamp.physicalMillis < $0 }) ?? true,
                  observed.allSatisfy({ stable.covers($0) })
            else { return nil }
            if heldInFull == nil { heldInFull = Set(operations.lazy.map(\.id)) }
            guard observed.allSatisfy({ !heldInFull!.contains($0) || dropping.contains($0) }) else { return nil }
            return operation.id
        }
    }
}

extension KeptHistory {
    /// The wall-clock instant (milliseconds) before which operations are old enough to drop, as of
    /// `nowMillis`; nil when age keeps nothing.
    func keeps(nowMillis: UInt64) -> UInt64? {
        guard let age = newerThanMillis else { return nil }
        return nowMillis > age ? nowMillis - age : 0
    }
}

extension RecordState {
    /// Whether two states of one record hold the same registers, tags and purge mark: equal but
    /// for which operations each was built from (replicas that compacted differently differ
    /// there), and for removed dots at or below `stable` that one of them has forgotten.
    package func hasSameContent(as other: RecordState, forgettingDotsThrough stable: VersionVector = VersionVector()) -> Bool {
        ref == other.ref && isPurged == other.isPurged && tags.isSame(as: other.tags, forgettingDotsThrough: stable)
            && registers.elementsEqual(other.registers) { $0.field == $1.field && $0.register == $1.register }
    }
}

extension TagSet {
    /// Whether the two sets hold the same live dots of every tag, and the same removed dots but
    /// for those at or below `stable`, which either may have forgotten (SPEC.md §5.8).
    package func isSame(as other: TagSet, forgettingDotsThrough stable: VersionVector) -> Bool {
        guard !stable.entries.isEmpty else { return self == other }
        let mine = tags
        let theirs = other.tags
        for tag in Set(mine.keys).union(theirs.keys) {
            let a = mine[tag] ?? TagState()
            let b = theirs[tag] ?? TagState()
            guard a.live == b.live else { return false }
            let unstable = { (dots: Dots) in dots.filter { !stable.covers($0) } }
            guard unstable(a.removed) == unstable(b.removed) else { return false }
        }
        return true
    }
}
