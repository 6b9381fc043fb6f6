import Foundation
import Testing

/// `init` and where syncctl finds its store: `--store` (before or after the subcommand), then
/// `SYNCCTL_STORE`, then `$XDG_DATA_HOME/concord/store.db`, then `~/.local/share/concord/store.db`.
@Suite(.waitsForProcesses) struct StoreLocationTests {
    @Test func initPrintsANewReplicaIDAndCreatesTheStore() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("nested/dirs/replica.db")
        let result = try sandbox.run(["init", "--store", path, "--name", "laptop"])
        #expect(result.succeeded, "\(result)")
        #expect(result.stderr.isEmpty)
        #expect(result.stdoutLines.count == 1)
        let replica = result.out
        #expect(isRecordID(replica), "init printed \(String(reflecting: replica))")
        #expect(FileManager.default.fileExists(atPath: path), "init made the missing directories and the store")

        let store = Store(sandbox: sandbox, path: path)
        let status = try store.status()
        #expect(status.string("replica") == replica)
        #expect(status.string("name") == "laptop")
        #expect(status.string("store") == path)
        #expect(status.int("schemaVersion") == 9)
        #expect(status.int("operations") == 0)
        #expect(try store.dump() == #"{"format":"concord-dump","records":[],"version":1}"#)

        // A second store gets another replica id.
        let other = try sandbox.run(["init", "--store", sandbox.path("other.db")])
        #expect(other.succeeded)
        #expect(isRecordID(other.out))
        #expect(other.out != replica)
    }

    @Test func initOnAnExistingStoreFailsAndLeavesItAlone() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore("a.db")
        let id = try store.addReminder("keep me")
        let before = try store.snapshot()
        // Taken after the last command that opened the store (opening one rewrites its header).
        var bytes = try store.bytes()

        let again = try sandbox.run(["init", "--store", store.path])
        expectOneLineFailure(again, mentions: ["a store already exists at \(store.path)"], code: 1)
        #expect(try store.bytes() == bytes, "a failed init must not touch the file")
        #expect(try store.snapshot() == before)
        #expect(try store.show(id).string("title") == "keep me")

        // Also when the path is given another way.
        bytes = try store.bytes()
        let viaEnvironment = try sandbox.run(["init", "--name", "other"], environment: ["SYNCCTL_STORE": store.path])
        expectOneLineFailure(viaEnvironment, mentions: ["already exists"], code: 1)
        #expect(try store.bytes() == bytes)
        #expect(try store.snapshot() == before)
    }

    @Test func storeOptionWorksBeforeAndAfterTheSubcommand() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("s.db")
        let created = try sandbox.run(["--store", path, "init"])
        #expect(created.succeeded, "\(created)")
        #expect(isRecordID(created.out))

        let first = try sandbox.run(["--store", path, "reminder", "add", "before"])
        let second = try sandbox.run(["reminder", "add", "after", "--store", path])
        let third = try sandbox.run(["--store=\(path)", "note", "add", "equals before"])
        let fourth = try sandbox.run(["note", "add", "equals after", "--store=\(path)"])
        for result in [first, second, third, fourth] {
            #expect(result.succeeded, "\(result)")
            #expect(isRecordID(result.out), "\(result)")
        }
        // Nothing went to the default location.
        #expect(!FileManager.default.fileExists(atPath: sandbox.dataHome.appendingPathComponent("concord/store.db").path))

        let before = try sandbox.run(["--store", path, "reminder", "list", "--json"])
        let after = try sandbox.run(["reminder", "list", "--json", "--store", path])
        #expect(before.succeeded && after.succeeded)
        #expect(before.stdout == after.stdout)
        let titles = try jsonArray(before.out).compactMap { $0.string("title") }
        #expect(Set(titles) == ["before", "after"])
        let notes = try jsonArray(sandbox.run(["--store", path, "note", "list", "--json"]).out).compactMap { $0.string("title") }
        #expect(Set(notes) == ["equals before", "equals after"])

        let status = try jsonObject(sandbox.run(["--store", path, "status", "--json"]).out)
        #expect(status.string("replica") == created.out)
    }

    /// `syncctl --store PATH reminder add -- -title`: the leading `--store` is moved to the end of
    /// the arguments, after the `--` terminator, where it becomes two more positional arguments.
    @Test func storeOptionBeforeTheSubcommandWorksWithADoubleDash() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        // Control: with --store after the subcommand, `--` lets a title start with a dash.
        let control = try sandbox.run(["reminder", "add", "--store", store.path, "--", "-starts with a dash"])
        #expect(control.succeeded, "\(control)")

        let hoisted = try sandbox.run(["--store", store.path, "reminder", "add", "--", "-also a dash"])
        #expect(hoisted.succeeded, "--store before the subcommand must work with '--' too: \(hoisted)")
        let titles = try store.reminders().compactMap { $0.string("title") }
        #expect(titles.contains("-also a dash"), "titles: \(titles)")
    }

    @Test func syncctlStoreEnvironmentVariableIsHonoured() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("from-env.db")
        let environment: [String: String?] = ["SYNCCTL_STORE": path]
        let created = try sandbox.run(["init"], environment: environment)
        #expect(created.succeeded, "\(created)")
        #expect(FileManager.default.fileExists(atPath: path))
        #expect(!FileManager.default.fileExists(atPath: sandbox.dataHome.appendingPathComponent("concord/store.db").path))

        let added = try sandbox.run(["reminder", "add", "via env"], environment: environment)
        #expect(added.succeeded, "\(added)")
        let status = try jsonObject(sandbox.run(["status", "--json"], environment: environment).out)
        #expect(status.string("store") == path)
        #expect(status.string("replica") == created.out)
        #expect(try Store(sandbox: sandbox, path: path).reminders().map { $0.string("id") } == [added.out])

        // --store wins over SYNCCTL_STORE.
        let explicit = try sandbox.makeStore("explicit.db")
        let listed = try sandbox.run(["reminder", "list", "--json", "--store", explicit.path], environment: environment)
        #expect(listed.succeeded)
        #expect(try jsonArray(listed.out).isEmpty)

        // An empty SYNCCTL_STORE counts as unset: the XDG default is used (and is missing here).
        let empty = try sandbox.run(["status"], environment: ["SYNCCTL_STORE": ""])
        expectOneLineFailure(empty, mentions: ["no store at", "concord/store.db", "syncctl init"])
    }

    @Test func xdgDataHomeDefaultIsHonoured() throws {
        let sandbox = try Sandbox()
        let expected = sandbox.dataHome.appendingPathComponent("concord/store.db").path
        let created = try sandbox.run(["init"])
        #expect(created.succeeded, "\(created)")
        #expect(FileManager.default.fileExists(atPath: expected), "init creates $XDG_DATA_HOME/concord/store.db")

        let id = try sandbox.run(["note", "add", "default store"]).out
        #expect(isRecordID(id))
        let status = try jsonObject(sandbox.run(["status", "--json"]).out)
        #expect(status.string("store") == expected)
        #expect(status.string("replica") == created.out)
        let notes = try Store(sandbox: sandbox, path: expected).notes()
        #expect(notes.map { $0.string("id") } == [id])
    }

    /// With XDG_DATA_HOME unset (or empty) the store is `$HOME/.local/share/concord/store.db`
    /// (the help text's `~/.local/share/...`, and the XDG base directory rule). Only read-only
    /// commands are run without `--store` here, so nothing is ever written outside the sandbox.
    @Test func homeFallbackIsUsedWhenXDGDataHomeIsUnset() throws {
        let sandbox = try Sandbox()
        let expected = sandbox.home.appendingPathComponent(".local/share/concord/store.db").path
        let store = Store(sandbox: sandbox, path: expected)
        let created = try sandbox.run(["init", "--store", expected])
        #expect(created.succeeded, "\(created)")

        // If syncctl ignores HOME it opens the account's real default store; refuse to run then,
        // rather than touch a real user's data.
        let accountDefault = FileManager.default.homeDirectoryForCurrentUser
            .appendingPathComponent(".local/share/concord/store.db").path
        try #require(
            !FileManager.default.fileExists(atPath: accountDefault),
            "a real store exists at \(accountDefault); this test will not risk opening it")

        for xdg: String? in [nil, ""] {
            let result = try sandbox.run(["status", "--json"], environment: ["XDG_DATA_HOME": xdg])
            #expect(result.succeeded, "with HOME=\(sandbox.home.path) and XDG_DATA_HOME=\(xdg.map { "'\($0)'" } ?? "unset"), syncctl should read \(expected): \(result)")
            if result.succeeded {
                let status = try jsonObject(result.out)
                #expect(status.string("store") == expected)
                #expect(status.string("replica") == created.out)
            }
        }
        #expect(try store.operationCount() == 0)
    }

    @Test func missingStoreSaysToRunInitAndCreatesNothing() throws {
        let sandbox = try Sandbox()
        let path = sandbox.path("nowhere/missing.db")
        for arguments in [["status"], ["reminder", "add", "x"], ["note", "list"], ["dump"], ["log"], ["merge", sandbox.path("x.db")]] {
            let result = try sandbox.run(arguments + ["--store", path])
            expectOneLineFailure(result, mentions: ["no store at \(path)", "syncctl init"])
        }
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(!FileManager.default.fileExists(atPath: sandbox.path("nowhere")))
        // The default location too.
        let result = try sandbox.run(["reminder", "list"])
        expectOneLineFailure(result, mentions: ["no store at", "syncctl init"])
        #expect(!FileManager.default.fileExists(atPath: sandbox.dataHome.appendingPathComponent("concord").path))
    }
}
