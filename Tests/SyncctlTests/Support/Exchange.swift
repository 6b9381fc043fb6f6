import Foundation
import Testing

// Helpers for the exchange commands (export, merge of bundles, sync through a shared folder):
// files and folders in a sandbox, bundle bytes, and syncctl running in the background.

extension Sandbox {
    /// Creates a directory inside the sandbox and returns its path.
    @discardableResult
    func makeDirectory(_ name: String) throws -> String {
        let path = path(name)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Writes `data` to `name` (a path inside the sandbox, or an absolute path) and returns the path.
    @discardableResult
    func write(_ data: Data, to name: String) throws -> String {
        let path = name.hasPrefix("/") ? name : path(name)
        try data.write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Starts syncctl in the background; its output goes to files in the sandbox.
    func start(_ arguments: [String]) throws -> BackgroundRun {
        try BackgroundRun(executable: SyncctlBinary.require(), arguments: arguments, environment: environment(), directory: root)
    }
}

extension Store {
    /// The store's replica id, from `status --json`.
    func replicaID(sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        try #require(try status(sourceLocation: sourceLocation).string("replica"), sourceLocation: sourceLocation)
    }

    /// `status --json` as printed (the text, to give to `export --since`).
    func statusJSON(sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        try ok("status", "--json", sourceLocation: sourceLocation)
    }
}

/// Every entry of a directory (hidden ones too) with its size, and its contents' hash for files:
/// two listings are equal when nothing in the directory was added, removed or rewritten.
func listing(of directory: String) throws -> [String: String] {
    var result: [String: String] = [:]
    for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
        let path = (directory as NSString).appendingPathComponent(name)
        var isDirectory: ObjCBool = false
        _ = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
        if isDirectory.boolValue {
            result[name] = "directory"
        } else {
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            result[name] = "\(data.count) bytes, fnv \(fnv1a(data))"
        }
    }
    return result
}

/// The names of the bundle files published in a shared folder's layout-1 directory, sorted: not
/// the hidden temporary files that a sync writes before it links them under their names, so that
/// a test waiting for a file sees it whole.
func bundleNames(in folder: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: (folder as NSString).appendingPathComponent("concord-v1"))
        .filter { !$0.hasPrefix(".") }
        .sorted()
}

private func fnv1a(_ data: Data) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in data {
        hash ^= UInt64(byte)
        hash = hash &* 0x100_0000_01b3
    }
    return String(hash, radix: 16)
}

/// A file's size in bytes.
func fileSize(_ path: String) throws -> Int {
    try #require((try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue)
}

/// What `export` printed, parsed: `exported N operation(s) to FILE (B bytes, X bytes per operation)`.
struct ExportLine: Equatable {
    var operations: Int
    var file: String
    var bytes: Int
    var perOperation: String

    init?(_ line: String) {
        guard line.hasPrefix("exported "), line.hasSuffix(" bytes per operation)") else { return nil }
        let body = line.dropFirst("exported ".count).dropLast(" bytes per operation)".count)
        guard let space = body.firstIndex(of: " "), let count = Int(body[..<space]) else { return nil }
        let word = count == 1 ? " operation to " : " operations to "
        let afterCount = body[space...]
        guard afterCount.hasPrefix(word) else { return nil }
        let rest = afterCount.dropFirst(word.count)
        guard let open = rest.range(of: " (", options: .backwards) else { return nil }
        let inside = rest[open.upperBound...]
        guard let comma = inside.range(of: " bytes, "), let bytes = Int(inside[..<comma.lowerBound]) else { return nil }
        operations = count
        file = String(rest[..<open.lowerBound])
        self.bytes = bytes
        perOperation = String(inside[comma.upperBound...])
    }
}

// MARK: Bundle bytes (SPEC.md §13)

/// The regions of a bundle file, found by walking its block headers.
struct BundleLayout {
    struct Block {
        var type: UInt8
        /// Where the block's 14-byte header starts.
        var headerOffset: Int
        /// Where its stored bytes start, and how many there are.
        var payloadOffset: Int
        var payloadLength: Int
    }

    var blocks: [Block] = []

    init(_ data: Data) throws {
        let bytes = [UInt8](data)
        try #require(bytes.count >= 10 && Array(bytes[0..<8]) == [0x89, 0x43, 0x4E, 0x43, 0x44, 0x0D, 0x0A, 0x1A], "not a bundle")
        var offset = 10
        while offset < bytes.count {
            try #require(offset + 14 <= bytes.count, "a block header runs past the end")
            let length = bytes[offset + 2..<offset + 6].reduce(0) { $0 << 8 | Int($1) }
            blocks.append(Block(type: bytes[offset], headerOffset: offset, payloadOffset: offset + 14, payloadLength: length))
            offset += 14 + length
        }
        try #require(offset == bytes.count, "blocks do not end at the end of the file")
    }

    func first(_ type: UInt8) throws -> Block {
        try #require(blocks.first { $0.type == type }, "no block of type \(type)")
    }
}

/// `data` with the byte at `offset` inverted.
func flippingByte(_ data: Data, at offset: Int) -> Data {
    var copy = data
    copy[copy.startIndex + offset] ^= 0xFF
    return copy
}

// MARK: Background runs

/// syncctl running in the background (for `sync --watch`), with its output in files. Killed when
/// released if it is still running.
final class BackgroundRun {
    let arguments: [String]
    private let process: Process
    private let outURL: URL
    private let errURL: URL

    init(executable: URL, arguments: [String], environment: [String: String], directory: URL) throws {
        self.arguments = arguments
        let token = UUID().uuidString
        outURL = directory.appendingPathComponent("background-stdout-\(token)")
        errURL = directory.appendingPathComponent("background-stderr-\(token)")
        process = try startProcess(executable, arguments, environment: environment, directory: directory, stdout: outURL, stderr: errURL)
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    var isRunning: Bool { process.isRunning }
    var pid: Int32 { process.processIdentifier }
    var stdout: String { String(decoding: (try? Data(contentsOf: outURL)) ?? Data(), as: UTF8.self) }
    var stderr: String { String(decoding: (try? Data(contentsOf: errURL)) ?? Data(), as: UTF8.self) }

    func send(_ signal: Int32) {
        if process.isRunning { kill(process.processIdentifier, signal) }
    }

    /// Waits for the process to exit, at most `timeout` seconds (then kills it and returns a
    /// result marked as timed out).
    func wait(timeout: TimeInterval) -> RunResult {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline {
            Thread.sleep(forTimeInterval: 0.05)
        }
        let timedOut = process.isRunning
        if timedOut {
            kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
        return RunResult(
            arguments: arguments, stdout: stdout, stderr: stderr, status: process.terminationStatus,
            crashed: process.terminationReason == .uncaughtSignal, timedOut: timedOut)
    }
}

/// Polls `condition` every 0.1 s until it holds or `timeout` seconds pass; returns whether it held.
func eventually(timeout: TimeInterval, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while true {
        if try condition() { return true }
        if Date() >= deadline { return false }
        Thread.sleep(forTimeInterval: 0.1)
    }
}
