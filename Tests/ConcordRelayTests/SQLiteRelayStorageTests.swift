import ConcordRelayProtocol
import ConcordTestSupport
import Crypto
import Foundation
import Testing
@testable import ConcordRelay

/// The embedded back end (SPEC.md §16.4): atomic stores and deletions that move the cursor, the
/// quota, and waits that a change ends at once.
@Suite struct SQLiteRelayStorageTests {
    let directory: String
    let storage: SQLiteRelayStorage
    static let space = "6206552f3d44d4a56bf58959efbeb2f0"
    static let other = "00000000000000000000000000000000"
    static let quota = RelayQuota(bytes: 100, files: 3)

    init() throws {
        directory = NSTemporaryDirectory() + "relay-storage-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        storage = try SQLiteRelayStorage(path: directory + "/relay.db")
    }

    static func name(_ serial: Int) -> String {
        "0123456789abcdef0123456789abcdef-" + String(repeating: "0", count: 10 - String(serial).count) + String(serial) + ".cbundle"
    }

    func store(_ bytes: [UInt8], as serial: Int, in space: String = space) async throws -> RelayStoreOutcome {
        try await storage.store(bytes, sha256: Array(SHA256.hash(data: bytes)), as: Self.name(serial), in: space, quota: Self.quota)
    }

    @Test func storesListsAndDeletesWithACursorThatGrows() throws {
        try runOffThePool { [self] () async throws in
            #expect(try await storage.listing(of: Self.space) == RelayListing(files: [], cursor: 0))
            #expect(try await store([1, 2, 3], as: 2) == .stored)
            #expect(try await store([4], as: 1) == .stored)
            let listing = try await storage.listing(of: Self.space)
            #expect(listing.files.map(\.name) == [Self.name(1), Self.name(2)], "by name")
            #expect(listing.files.map(\.size) == [1, 3])
            #expect(listing.files[1].sha256 == Array(SHA256.hash(data: [1, 2, 3] as [UInt8])))
            #expect(listing.cursor == 2)
            #expect(try await storage.contents(of: Self.name(2), in: Self.space) == [1, 2, 3])
            #expect(try await storage.contents(of: Self.name(2), in: Self.other) == nil, "spaces are apart")
            #expect(try await storage.listing(of: Self.other) == RelayListing(files: [], cursor: 0))

            #expect(try await store([1, 2, 3], as: 2) == .alreadyHeld)
            #expect(try await store([9, 9], as: 2) == .nameTaken(otherSHA256: Array(SHA256.hash(data: [1, 2, 3] as [UInt8]))))
            #expect(try await storage.listing(of: Self.space).cursor == 2, "neither moves the cursor")

            #expect(try await store([5, 6], as: 3) == .stored)
            #expect(try await storage.delete([Self.name(2), Self.name(3), Self.name(4)], in: Self.space) == [Self.name(2), Self.name(3)], "those it held")
            #expect(try await storage.listing(of: Self.space).cursor == 4, "one transaction: the cursor moves once")
            #expect(try await storage.delete([Self.name(2)], in: Self.space) == [])
            #expect(try await storage.listing(of: Self.space) == RelayListing(files: [RelayFile(name: Self.name(1), sha256: Array(SHA256.hash(data: [4] as [UInt8])), size: 1)], cursor: 4), "deleting nothing moves nothing")
            #expect(try await storage.deleteSpace(Self.space) == 1)
            #expect(try await storage.listing(of: Self.space) == RelayListing(files: [], cursor: 5), "the cursor stays, and moves")
        }
    }

    @Test func theQuotaCountsBytesAndFilesOfTheSpaceAlone() throws {
        try runOffThePool { [self] () async throws in
            #expect(try await store(Array(repeating: 1, count: 60), as: 1) == .stored)
            #expect(try await store(Array(repeating: 2, count: 41), as: 2) == .spaceFull(bytes: 60, files: 1))
            #expect(try await store(Array(repeating: 2, count: 40), as: 2) == .stored, "exactly the quota")
            #expect(try await store([3], as: 3) == .spaceFull(bytes: 100, files: 2))
            #expect(try await store([3], as: 3, in: Self.other) == .stored, "another space has a quota of its own")
            #expect(try await storage.delete([Self.name(1)], in: Self.space) == [Self.name(1)])
            #expect(try await store([3], as: 3) == .stored, "a deletion frees its bytes")
            #expect(try await store([4], as: 4) == .stored)
            #expect(try await store([5], as: 5) == .spaceFull(bytes: 42, files: 3))
        }
    }

    @Test func aWaitEndsAtOnceOnAChangeAndAtItsTimeoutOtherwise() throws {
        try runOffThePool { [self] () async throws in
            let clock = ContinuousClock()
            var start = clock.now
            try await storage.waitForChange(of: Self.space, from: 0, timeout: .milliseconds(300))
            #expect(clock.now - start >= .milliseconds(300), "nothing changed")

            start = clock.now
            try await storage.waitForChange(of: Self.space, from: 5, timeout: .seconds(30))
            #expect(clock.now - start < .seconds(5), "the cursor is not the one given: at once")

            start = clock.now
            async let waited: Void = storage.waitForChange(of: Self.space, from: 0, timeout: .seconds(30))
            try await Task.sleep(for: .milliseconds(200))
            #expect(try await store([1], as: 1) == .stored)
            try await waited
            #expect(clock.now - start < .seconds(5), "woken by the store")

            // A change in another space does not end the wait.
            start = clock.now
            async let other: Void = storage.waitForChange(of: Self.space, from: 1, timeout: .milliseconds(1500))
            try await Task.sleep(for: .milliseconds(100))
            #expect(try await store([1], as: 1, in: Self.other) == .stored)
            try await other
            #expect(clock.now - start >= .milliseconds(1500))
        }
    }

    /// Another process on the same file: the wait sees its change by looking every second.
    @Test func aWaitSeesAChangeMadeThroughAnotherConnection() throws {
        try runOffThePool { [self] () async throws in
            let second = try SQLiteRelayStorage(path: directory + "/relay.db")
            let start = ContinuousClock.now
            async let waited: Void = storage.waitForChange(of: Self.space, from: 0, timeout: .seconds(30))
            try await Task.sleep(for: .milliseconds(100))
            #expect(try await second.store([7], sha256: Array(SHA256.hash(data: [7] as [UInt8])), as: Self.name(1), in: Self.space, quota: Self.quota) == .stored)
            try await waited
            #expect(ContinuousClock.now - start < .seconds(5))
        }
    }
}
