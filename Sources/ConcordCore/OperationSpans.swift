/// The ids of the operations that acted on one record, as spans of consecutive seqs per author:
/// where a record's history is in the log (SPEC.md §9, the `crdt` blob), so that reading it
/// touches that record's log rows and no others. Operations of one change travel in one span.
package struct OperationSpans: Hashable, Sendable {
    /// Seqs `first...last` of one author.
    package struct Span: Hashable, Sendable {
        /// The author.
        package var replica: ReplicaID
        /// The first seq.
        package var first: UInt64
        /// The last seq, at least `first`.
        package var last: UInt64

        /// The seqs `first...last` of `replica`.
        package init(replica: ReplicaID, first: UInt64, last: UInt64) {
            self.replica = replica
            self.first = first
            self.last = last
        }
    }

    /// Ascending by replica, then seq; no two of one replica overlap or touch.
    package private(set) var spans: [Span] = []

    /// No operation.
    package init() {}

    /// The spans of `spans`, in any order, overlapping or not.
    package init(_ spans: some Sequence<Span>) {
        for span in spans { insert(span) }
    }

    /// How many operations the spans hold.
    package var count: UInt64 { spans.reduce(0) { $0 + ($1.last - $1.first + 1) } }

    /// Adds one operation's id.
    @inline(__always)
    package mutating func insert(_ id: OperationID) {
        // Operations of one record mostly come in seq order, one author at a time.
        if let last = spans.last, last.replica == id.replica, last.last &+ 1 == id.seq {
            spans[spans.count - 1].last = id.seq
            return
        }
        insert(Span(replica: id.replica, first: id.seq, last: id.seq))
    }

    /// Adds a span, joining it with those it overlaps or touches.
    package mutating func insert(_ span: Span) {
        // The first span that does not end before `span` starts (with a gap between them).
        var low = 0
        var high = spans.count
        while low < high {
            let mid = (low + high) / 2
            let other = spans[mid]
            if other.replica < span.replica || (other.replica == span.replica && other.last &+ 1 < span.first && other.last < .max) {
                low = mid + 1
            } else {
                high = mid
            }
        }
        var joined = span
        var end = low
        while end < spans.count, spans[end].replica == span.replica, spans[end].first <= joined.last &+ 1 || joined.last == .max {
            joined.first = min(joined.first, spans[end].first)
            joined.last = max(joined.last, spans[end].last)
            end += 1
        }
        spans.replaceSubrange(low..<end, with: CollectionOfOne(joined))
    }

    /// Joins `other` in.
    package mutating func formUnion(_ other: OperationSpans) {
        if spans.isEmpty {
            self = other
            return
        }
        for span in other.spans { insert(span) }
    }
}

extension OperationSpans {
    /// Whether `id` is among the operations.
    package func contains(_ id: OperationID) -> Bool {
        spans.contains { $0.replica == id.replica && $0.first <= id.seq && id.seq <= $0.last }
    }

    /// Removes one operation's id, splitting the span that holds it.
    package mutating func remove(_ id: OperationID) {
        guard let index = spans.firstIndex(where: { $0.replica == id.replica && $0.first <= id.seq && id.seq <= $0.last }) else { return }
        let span = spans[index]
        var pieces: [Span] = []
        if span.first < id.seq { pieces.append(Span(replica: span.replica, first: span.first, last: id.seq - 1)) }
        if id.seq < span.last { pieces.append(Span(replica: span.replica, first: id.seq + 1, last: span.last)) }
        spans.replaceSubrange(index...index, with: pieces)
    }
}
