import ConcordCore

/// The sorted operations of a merge folded into one state per record: what applying them to a
/// record that held nothing gives (`RecordState.apply`), to be joined with the record's row. They
/// are folded on a thread of their own, ahead of the batch that writes them (`Prefetch`), when
/// there are enough of them to pay for the thread (`MergeBatch.foldThreadFrom`). Call `stop` when
/// done.
final class FoldedRecords {
    private var inline: Folding?
    private let prefetch: Prefetch<RecordState>?

    init(_ operations: OperationSorter.Finished, _ limits: MergeBatch) {
        var folding = Folding(operations.recordOrder())
        if operations.sortedCount >= limits.foldThreadFrom {
            inline = nil
            prefetch = Prefetch(chunk: 256) { try folding.next() }
        } else {
            inline = folding
            prefetch = nil
        }
    }

    /// A caller that forgot `stop` still leaves no thread behind.
    deinit { prefetch?.stop() }

    func next() throws -> RecordState? {
        if let prefetch { return try prefetch.next() }
        return try inline!.next()
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
