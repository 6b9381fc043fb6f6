import ConcordCore
import ConcordStore
import Foundation
import Testing

/// A program that follows a store (here this test process, through `changes()`) while `syncctl`
/// processes write it (SPEC.md §7.1): it hears of every record each of them wrote, once, soon after
/// the command exited, through the commit bell.
@Suite(.waitsForProcesses) struct ObserveProcessesTests {
    /// The writers wait for their processes on queues of their own (`ConcordStore.offload`), not on
    /// the two threads that every process-running suite shares, which a full test run keeps busy
    /// for minutes at a time: three writers there waited past the time limit.
    ///
    /// The test itself blocks nothing, so it runs on the shared pool: on the threads set apart for
    /// the suites that wait for processes, each of its awaits waited for one of them to be free,
    /// which the soak and kill tests keep for minutes (277 s, then past the limit, in full runs).
    @Test(.timeLimit(.minutes(5)))
    func aFollowerHearsOfEveryCommitOfThreeWriterProcessesOnce() async throws {
        try await withTaskExecutorPreference(globalConcurrentExecutor) { try await followThreeWriters() }
    }

    private func followThreeWriters() async throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let observed = try await ConcordStore.open(at: store.path)
        let stream = observed.changes()

        // Three writer processes at once, 15 reminders each.
        let run = try sandbox.runner()
        let path = store.path
        let ids = try await withThrowingTaskGroup(of: [String].self) { group in
            for writer in 0..<3 {
                group.addTask {
                    try await ConcordStore.offload(on: DispatchQueue(label: "writer \(writer)")) {
                        try (0..<15).map { index in
                            let result = try run(["reminder", "add", "writer \(writer), \(index)", "--store", path])
                            #expect(result.succeeded, "\(result)")
                            return result.out
                        }
                    }
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(ids.count == 45)
        let expected = Set(ids.compactMap { RecordID(hex: $0) }.map { RecordRef.reminder($0) })
        #expect(expected.count == 45)

        // Each is heard (the stream keeps what comes while the writers run), and none twice.
        var heard: [StoreChange] = []
        for try await change in stream {
            heard.append(change)
            if Set(heard.flatMap(\.records)).isSuperset(of: expected) { break }
        }
        #expect(Set(heard.flatMap(\.records)) == expected)
        #expect(heard.flatMap(\.records).count == expected.count, "each record once")
        #expect(heard.allSatisfy { $0.origin == .local })
        try await observed.close()
    }
}
