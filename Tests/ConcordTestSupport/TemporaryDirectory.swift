import Foundation

/// A temporary directory of one test, removed when the value is released. It lives in `/dev/shm`
/// where there is one (a RAM file system: the many fsyncs of store commits and folder syncs cost
/// nothing there, so the property tests stay fast), else in the system's temporary directory.
public final class TemporaryDirectory: @unchecked Sendable {
    public let path: String

    public init() throws {
        var isDirectory: ObjCBool = false
        let base =
            FileManager.default.fileExists(atPath: "/dev/shm", isDirectory: &isDirectory) && isDirectory.boolValue
                && access("/dev/shm", W_OK) == 0
            ? "/dev/shm/" : NSTemporaryDirectory()
        path = (base.hasSuffix("/") ? base : base + "/") + "concord-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    public func file(_ name: String) -> String { path + "/" + name }

    /// Makes a subdirectory and returns its path.
    public func directory(_ name: String) throws -> String {
        let path = file(name)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    deinit {
        // A test may leave a file it made unreadable; make everything removable again.
        if let enumerator = FileManager.default.enumerator(atPath: path) {
            for case let name as String in enumerator { chmod(path + "/" + name, 0o755) }
        }
        try? FileManager.default.removeItem(atPath: path)
    }
}
