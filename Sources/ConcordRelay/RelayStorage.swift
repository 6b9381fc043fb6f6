import ConcordCore
import ConcordRelayProtocol
import Foundation

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
    /// Deletes a file; whether the space held it.
    func delete(_ name: String, in space: String) async throws -> Bool
    /// Deletes every file of a space; how many there were.
    func deleteSpace(_ space: String) async throws -> Int
    /// Returns once the space's cursor is not `cursor`, or `timeout` has passed (sooner when the
    /// task is cancelled).
    func waitForChange(of space: String, from cursor: Int64, timeout: Duration) async throws
}
