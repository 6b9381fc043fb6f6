import ConcordCore
import ConcordStore
import Foundation
import Testing

/// A program that follows a store (here this test process, through `changes()`) while `syncctl`
/// processes write it (SPEC.md §7.1): it hears of every record each of them wrote, once, soon after
/// the command exited, through the commit bell.
@Suite struct ObserveProcessesTests {
    @Test func aFollowerHearsOfEveryCommitOfThreeWriterProcessesOnce() async throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let observed = try await ConcordStore.open(at: store.path)
        let stream = observed.changes()
        let heard = Heard()
        let follower = Task {
            for await change in stream { heard.add(change) }
        }
        defer { follower.cancel() }

        // Three writer processes at once, 15 reminders each.
        let run = try sandbox.runner()
        let path = store.path
        let ids = try await withThrowingTaskGroup(of: [String].self) { group in
            for writer in 0..<3 {
                group.addTask {
                    try (0..<15).map { index in
                        let result = try run(["reminder", "add", "writer \(writer), \(index)", "--store", path])
                        #expect(result.succeeded, "\(result)")
                        return result.out
                    }
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(ids.count == 45)
        let expected = Set(ids.compactMap { RecordID(hex: $0) }.map { RecordRef.reminder($0) })
        #expect(expected.count == 45)

        // Each is heard; a generous bound for a loaded machine (the figures come from the bench).
        let deadline = Date().addingTimeInterval(20)
        while Set(heard.records) != expected, Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(Set(heard.records) == expected)
        try await Task.sleep(for: .milliseconds(300))
        #expect(heard.records.count == expected.count, "each record once")
        #expect(heard.changes.allSatisfy { $0.origin == .local })
        try await observed.close()
    }

    final class Heard: @unchecked Sendable {
        // @unchecked Sendable: `all` is touched only with `lock` held.
        private let lock = NSLock()
        private var all: [StoreChange] = []

        func add(_ change: StoreChange) { lock.withLock { all.append(change) } }
        var changes: [StoreChange] { lock.withLock { all } }
        var records: [RecordRef] { changes.flatMap { $0.records } }
    }
}
