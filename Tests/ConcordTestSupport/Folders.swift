import ConcordCore
import Foundation

// Shared folders and the files in them (SPEC.md §14).

/// The names and sizes of the entries of `concord-v1` in `folder`.
public func listing(_ folder: String) throws -> [String: Int64] {
    let directory = folder + "/concord-v1"
    var result: [String: Int64] = [:]
    for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
        let attributes = try FileManager.default.attributesOfItem(atPath: directory + "/" + name)
        result[name] = (attributes[.size] as? NSNumber)?.int64Value ?? -1
    }
    return result
}

/// The bundle file name of a publisher's serial.
public func bundleName(_ hex: String, _ serial: Int) -> String {
    let digits = String(serial)
    return hex + "-" + String(repeating: "0", count: 10 - digits.count) + digits + ".cbundle"
}

/// A replica id's hex that no store of the test has.
public func strangerHex(_ n: UInt64) -> String { ReplicaID(high: 0xDEAD_BEEF_0000_0000 | n, low: n &* 0x9E37_79B9).hex }

public func readBytes(_ path: String) throws -> [UInt8] {
    [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
}

public func writeBytes(_ bytes: [UInt8], to path: String) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}
