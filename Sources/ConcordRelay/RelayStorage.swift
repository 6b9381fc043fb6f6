import ConcordCore
import ConcordRelayProtocol
import Foundation
import ServiceLifecycle

/// The limits of one space (SPEC.md §16.4): what an upload past them is refused with.
public struct RelayQuota: Hashable, Sendable {
    /// The most bytes a space's files may take together.
    public var bytes: Int
    /// The most files a space may hold.
    public var files: Int

    /// A quota of at most `bytes` bytes in at most `files` files.
    public init(bytes: Int, files: Int) {
        self.bytes = bytes
        self.files = files
    }
}

/// What storing an uploaded file did.
public enum RelayStoreOutcome: Hashable, Sendable {
    /// The file is stored now.
    case stored
    /// The space held this very file already (same name, same bytes): an upload repeated.
    case alreadyHeld
    /// The space holds another file under this name, whose SHA-256 is this.
    case nameTaken(otherSHA256: [UInt8])
    /// Storing it would take the space past its quota; what the space holds now.
    case spaceFull(bytes: Int, files: Int)
}

/// Where a relay keeps its spaces' files (SPEC.md §16.4). Every method is atomic: a file is
/// stored whole or not at all, and the cursor moves in the same transaction as the files.
public protocol RelayStorage: Sendable {
    /// The files of `space`, by name, and its cursor (0 for a space that holds nothing and never did).
    func listing(of space: String) async throws -> RelayListing
    /// The bytes of a file, or nil if the space holds no file of that name.
    func contents(of name: String, in space: String) async throws -> [UInt8]?
    /// Stores a file under `name` unless the space holds one of that name, or is full.
    func store(_ bytes: [UInt8], sha256: [UInt8], as name: String, in space: String, quota: RelayQuota) async throws -> RelayStoreOutcome
    /// Deletes the files of `names` (distinct, in name order) in one transaction, which moves
    /// the cursor once if the space held any of them; those it held, in name order.
    func delete(_ names: [String], in space: String) async throws -> [String]
    /// Deletes every file of a space; how many there were.
    func deleteSpace(_ space: String) async throws -> Int
    /// Returns once the space's cursor is not `cursor`, or `timeout` has passed (sooner when the
    /// task is cancelled).
    func waitForChange(of space: String, from cursor: Int64, timeout: Duration) async throws
    /// What must run beside the relay's server for the back end to work (a database client's
    /// connections, a listener for other nodes' changes); none by default.
    var services: [any Service] { get }
    /// Makes the back end ready once its services run, before the relay listens (its tables).
    func prepare() async throws
}

extension RelayStorage {
    /// None.
    public var services: [any Service] { [] }
    /// Nothing to do.
    public func prepare() async throws {}

    /// `waitForChange` for a back end whose changes ring `bell` with the space's name: the
    /// cursor (`readCursor`) is read again at each ring, and every `poll` regardless, in case a
    /// ring was missed (another process, a listener reconnecting).
    func waitForChange(
        of space: String, from cursor: Int64, timeout: Duration, bell: ChangeBell, poll: Duration,
        readCursor: () async throws -> Int64
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        while !Task.isCancelled {
            let rings = bell.rings(of: space)
            guard try await readCursor() == cursor else { return }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return }
            await bell.wait(for: space, after: rings, upTo: min(left, poll))
        }
    }
}
