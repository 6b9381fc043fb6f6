import ConcordCore

/// One file of a space as a relay lists it (SPEC.md §16.3): a shared folder's bundle file
/// (§14), sealed with the space's sync key (§13.1), which the relay cannot read.
public struct RelayFile: Hashable, Sendable {
    /// Its name, as in a shared folder: `<replica id>-<serial>.cbundle`.
    public var name: String
    /// The SHA-256 of its bytes.
    public var sha256: [UInt8]
    /// Its size in bytes.
    public var size: Int

    /// A file of `size` bytes named `name`, whose SHA-256 is `sha256`.
    public init(name: String, sha256: [UInt8], size: Int) {
        self.name = name
        self.sha256 = sha256
        self.size = size
    }
}

/// A space's files, and its cursor: a number that grows with every file stored or deleted in the
/// space, so that a device waits for the next change by naming the cursor it has seen.
public struct RelayListing: Hashable, Sendable {
    /// The files, by name.
    public var files: [RelayFile]
    /// The space's cursor: 0 for a space that never held anything.
    public var cursor: Int64

    /// A listing of `files` at `cursor`.
    public init(files: [RelayFile], cursor: Int64) {
        self.files = files
        self.cursor = cursor
    }
}


/// The names a relay's paths carry (SPEC.md §16.3).
public enum RelayNames {
    /// Whether `space` names a space: 32 lowercase hex digits.
    public static func isSpace(_ space: some StringProtocol) -> Bool {
        space.utf8.count == 32 && [UInt8](lowercaseHex: space) != nil
    }

    /// Whether `name` names a file: a shared folder's bundle name, `<replica id>-<serial>.cbundle`
    /// (§14), in lower case.
    ///
    /// Checked byte by byte, not with a regex: Swift parses a regex literal again each time it
    /// matches, which took a third of a live device's CPU (the mirror's names, at every wake).
    public static func isFile(_ name: some StringProtocol) -> Bool {
        let bytes = Array(name.utf8)
        guard bytes.count == 51, bytes[32] == UInt8(ascii: "-"), bytes[43...].elementsEqual(".cbundle".utf8) else { return false }
        return bytes[..<32].allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
            && bytes[33..<43].allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }
}
