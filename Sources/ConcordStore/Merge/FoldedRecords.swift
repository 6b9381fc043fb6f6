import ConcordCore

/// The sorted operations of a merge folded into one state per record: what applying them to a
/// record that held nothing gives (`RecordState.apply`), to be joined with the record's row. They
/// are folded on a thread of their own, ahead of the batch that writes them (`Prefetch`), when
/// there are enough of them to pay for the thread (`MergeBatch.foldThreadFrom`); that thread also
/// encodes each state's row, which `save` writes as it is when the record turns out new to the
/// store (the writing thread, which the merge waits for, then only binds it). Call `stop` when done.
final class FoldedRecords {
    private var inline: Folding?
    private let prefetch: Prefetch<FoldedRecord>?

    /// - Parameter directory: the store's replicas, read once `operations` were logged (so it
    ///   holds their authors). Its indexes stay right in every later transaction: a replica's
    ///   index never changes (`ReplicaDirectory`); one it lacks leaves the row to the writer.
    init(_ operations: OperationSorter.Finished, _ limits: MergeBatch, encodingWith directory: ReplicaDirectory) {
        var folding = Folding(operations.recordOrder())
        if operations.sortedCount >= limits.foldThreadFrom {
            inline = nil
            var directory = directory
            prefetch = Prefetch(chunk: 256) {
                guard let state = try folding.next() else { return nil }
                do {
                    return FoldedRecord(state: state, row: try RecordRows.encode(state, nil, &directory))
                } catch is ReplicaDirectory.Unregistered {
                    // The record names a replica the copy lacks: `save` registers it. (The copy
                    // never learns it, so later records that name it are left to `save` too.)
                    return FoldedRecord(state: state, row: nil)
                }
            }
        } else {
            inline = folding
            prefetch = nil
        }
    }

    /// A caller that forgot `stop` still leaves no thread behind.
    deinit { prefetch?.stop() }

    func next() throws -> FoldedRecord? {
        if let prefetch { return try prefetch.next() }
        return try inline!.next().map { FoldedRecord(state: $0, row: nil) }
    }

    func stop() {
        prefetch?.stop()
    }

    private struct Folding {
        private var operations: OperationSorter.Stream
        private var lookahead: Op?
        private var started = false

        init(_ operations: OperationSorter.Stream) {
            self.operations = operations
        }

        mutating func next() throws -> RecordState? {
            if !started {
                started = true
                lookahead = try operations.next()
            }
            guard let first = lookahead.take() else { return nil }
            var state = RecordState(ref: first.record)
            state.apply(first)
            while let operation = try operations.next() {
                guard operation.record == state.ref else {
                    lookahead = operation
                    break
                }
                state.apply(operation)
            }
            return state
        }
    }
}

/// One record's operations of a merge, folded (`FoldedRecords`).
struct FoldedRecord {
    var state: RecordState
    /// `state`'s row, when it was encoded ahead (`RecordRows.encode`): what `save` writes for a
    /// record that has no row yet.
    var row: RecordRows.EncodedRow?
}
