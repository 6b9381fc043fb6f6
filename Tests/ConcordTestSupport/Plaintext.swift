import Foundation

/// The files that hold `text`'s UTF-8 bytes, among `paths`: a directory is walked, and a file is
/// read with its SQLite WAL (`PATH-wal`) beside it. How the purge tests check that content is
/// gone, byte for byte, from store files and shared folders.
public func filesHolding(_ text: String, in paths: [String]) -> [String] {
    let needle = Data(text.utf8)
    var found: [String] = []
    for path in paths {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
        let files = isDirectory.boolValue
            ? (FileManager.default.enumerator(atPath: path)?.compactMap { $0 as? String }.map { path + "/" + $0 } ?? [])
            : [path, path + "-wal"]
        for file in files where FileManager.default.contents(atPath: file)?.range(of: needle) != nil { found.append(file) }
    }
    return found
}
