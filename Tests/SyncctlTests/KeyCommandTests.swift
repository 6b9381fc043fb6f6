import Foundation
import Testing

/// `syncctl key generate|import|show` (SPEC.md §11, §12, §15.1) and encrypted export and merge.
@Suite(.waitsForProcesses) struct KeyCommandTests {
    nonisolated(unsafe) static let keyPattern = /concord-key-1-[a-z2-7]{56}/

    func mode(_ path: String) throws -> Int {
        try #require((try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue) & 0o777
    }

    @Test func generateShowAndImportAKey() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        try a.addNote("something")
        #expect(try mode(a.path) == 0o644, "a store without a key keeps the usual mode")

        let generated = try a.ok("key", "generate").split(separator: "\n").map(String.init)
        #expect(generated.count == 2)
        let text = generated[0]
        #expect(text.wholeMatch(of: Self.keyPattern) != nil, "\(text)")
        let idLine = generated[1]
        #expect(idLine.wholeMatch(of: /key id [0-9a-f]{16}/) != nil, "\(idLine)")
        let id = String(idLine.dropFirst("key id ".count))
        #expect(try a.ok("key", "show") == "\(text)\n\(idLine)")
        #expect(try a.ok("key", "show", "--id") == id)
        for file in [a.path, a.path + "-wal", a.path + "-shm"] where FileManager.default.fileExists(atPath: file) {
            #expect(try mode(file) == 0o600, "\(file) is private once it holds a key")
        }

        // Import on b, in groups and upper case, as a person may type it.
        let body = text.dropFirst("concord-key-1-".count)
        let grouped = ["concord-key-1-" + body.prefix(8)] + stride(from: 8, to: body.count, by: 8).map { start in
            String(body.dropFirst(start).prefix(8))
        }
        let imported = try b.run(arguments: ["key", "import"] + grouped.map { $0.uppercased() })
        #expect(imported.succeeded, "\(imported)")
        #expect(imported.out == "imported sync key \(id)")
        #expect(try mode(b.path) == 0o600)
        #expect(try b.ok("key", "show") == "\(text)\n\(idLine)")
        #expect(try b.ok("key", "import", text) == "the store already holds sync key \(id)")

        // A key is never replaced by accident.
        try a.expectRefused(["key", "generate"], mentions: ["already holds sync key \(id)", "--force"])
        #expect(try a.ok("key", "show", "--id") == id)
        let forced = try a.ok("key", "generate", "--force").split(separator: "\n")
        #expect(forced.count == 2 && forced[1] != "key id \(id)")
        let newText = String(forced[0])
        try b.expectRefused(["key", "import", newText], mentions: ["already holds sync key \(id)", "key import --force"])
        #expect(try b.ok("key", "import", newText, "--force").hasPrefix("imported sync key "))
        #expect(try b.ok("key", "show") == (try a.ok("key", "show")))
    }

    @Test func aKeyIsReadFromStandardInput() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let text = try a.ok("key", "generate").split(separator: "\n")[0]
        let result = try runWithInput(sandbox, ["key", "import", "--store", b.path], input: "  \(text)\n")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try b.ok("key", "show", "--id") == (try a.ok("key", "show", "--id")))
    }

    @Test func badKeysAreRefusedInOneLineAndChangeNothing() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        try a.addReminder("keep me")
        let good = "concord-key-1-ibaueq2eivdeoscjjjfuytkoj5ifcustkrkvmv2ylfnfwxc5lzp4uksp"
        let bytesBefore = try a.bytes()
        try a.expectRefused(["key", "import", "concord-key-1-ibaueq2eivdeoscjjjfuytkoj5ifcustkrkvmv2ylfnfwxc5lzp4uksq"], mentions: ["typo", "checksum"], code: 1)
        try a.expectRefused(["key", "import", "concord-key-1-ibaueq2eivdeoscjjjfuytkoj5ifcustkrkvmv2ylfnfwxc5lzp4uks"], mentions: ["55 characters"], code: 1)
        try a.expectRefused(["key", "import", "concord-key-1-ibaueq2eivdeoscjjjfuytkoj5ifcustkrkvmv2ylfnfwxc5lzp4uk0p"], mentions: ["'0'", "the letter o?"], code: 1)
        try a.expectRefused(["key", "import", "hello"], mentions: ["starts with 'concord-key-1-'"], code: 1)
        try a.expectRefused(["key", "import", "concord-key-2-" + good.dropFirst(14)], mentions: ["format 2", "upgrade Concord"], code: 1)
        #expect(try a.bytes() == bytesBefore, "the store file is untouched")
        #expect(try mode(a.path) == 0o644)
        try a.expectRefused(["key", "show"], mentions: ["has no sync key", "key generate", "key import"], code: 1)
        // The fixture's key imports.
        #expect(try a.ok("key", "import", good) == "imported sync key f3b1228a62537ffa")
    }

    @Test func encryptedExportAndMerge() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let c = try sandbox.makeStore("c.db")
        try a.addReminder("secret plans", "--tag", "private")
        try a.expectRefused(["export", sandbox.path("x.cbundle"), "--encrypt"], mentions: ["has no sync key"], code: 1)
        let text = String(try a.ok("key", "generate").split(separator: "\n")[0])
        let id = try a.ok("key", "show", "--id")
        let exported = try a.ok("export", sandbox.path("x.cbundle"), "--encrypt")
        let count = try a.operationCount()
        #expect(exported.hasPrefix("exported \(count) operations to \(sandbox.path("x.cbundle"))"), "\(exported)")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: sandbox.path("x.cbundle")))
        #expect(bytes.starts(with: [0x89, 0x43, 0x4E, 0x43, 0x45, 0x0D, 0x0A, 0x1A]))
        #expect(!String(decoding: bytes, as: UTF8.self).contains("secret"))

        try b.expectRefused(["merge", sandbox.path("x.cbundle")], mentions: ["is encrypted (with sync key \(id))", "no sync key"], code: 1)
        try b.ok("key", "import", text)
        #expect(try b.ok("merge", sandbox.path("x.cbundle")) == "merged \(count) new operations from 1 replica")
        #expect(try b.dump() == (try a.dump()))
        try c.ok("key", "generate")
        try c.expectRefused(["merge", sandbox.path("x.cbundle")], mentions: ["encrypted with sync key \(id)", "this store holds sync key"], code: 1)
        // A changed byte: refused, nothing merged.
        var changed = bytes
        changed[changed.count - 3] ^= 1
        try changed.write(to: URL(fileURLWithPath: sandbox.path("y.cbundle")))
        let fresh = try sandbox.makeStore("d.db")
        try fresh.ok("key", "import", text)
        try fresh.expectRefused(["merge", sandbox.path("y.cbundle")], mentions: ["failed authentication"], code: 1)
        // Without --encrypt, export stays plain.
        try a.ok("export", sandbox.path("plain.cbundle"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: sandbox.path("plain.cbundle"))).starts(with: [0x89, 0x43, 0x4E, 0x43, 0x44]))
    }

    @Test func keyedStoresSyncThroughAFolderInCiphertext() throws {
        let sandbox = try Sandbox()
        let folder = try sandbox.makeDirectory("Shared")
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let text = String(try a.ok("key", "generate").split(separator: "\n")[0])
        try b.ok("key", "import", text)
        try a.addReminder("from a")
        try b.addNote("from b")
        for store in [a, b, a] { _ = try store.ok("sync", "--folder", folder) }
        #expect(try a.dump() == (try b.dump()))
        for name in try bundleNames(in: folder) {
            let data = try Data(contentsOf: URL(fileURLWithPath: folder + "/concord-v1/" + name))
            #expect(data.starts(with: [0x89, 0x43, 0x4E, 0x43, 0x45]), "\(name) is encrypted")
        }
        // A store without the key skips them, each with one warning, and exits 0.
        let c = try sandbox.makeStore("c.db")
        let result = try c.run("sync", "--folder", folder)
        #expect(result.succeeded)
        #expect(result.stderrLines.count == 2 && result.stderrLines.allSatisfy { $0.contains("this store has no sync key") }, "\(result)")
        #expect(try c.operationCount() == 0)
    }
}

/// Runs syncctl with `input` on its standard input.
func runWithInput(_ sandbox: Sandbox, _ arguments: [String], input: String) throws -> (status: Int32, stdout: String, stderr: String) {
    let process = Process()
    process.executableURL = try SyncctlBinary.require()
    process.arguments = arguments
    process.environment = sandbox.environment()
    let stdin = Pipe()
    let stdout = Pipe()
    let stderr = Pipe()
    process.standardInput = stdin
    process.standardOutput = stdout
    process.standardError = stderr
    try process.run()
    stdin.fileHandleForWriting.write(Data(input.utf8))
    try stdin.fileHandleForWriting.close()
    process.waitUntilExit()
    return (
        process.terminationStatus,
        String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self),
        String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
}
