import AsyncHTTPClient
import ConcordKeys
import ConcordRelayClient
import ConcordRelayProtocol
import ConcordTestSupport
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// The relay's two back ends (SPEC.md §16.4), for the tests that run on each.
enum RelayBackEnd: String, CaseIterable, CustomTestStringConvertible {
    /// `--data DIR`: a SQLite file.
    case embedded
    /// `--postgres URL`: a throwaway PostgreSQL server of the test's own.
    case postgres

    var testDescription: String { rawValue }
}

/// A running `syncctl relay` (SPEC.md §16.6), on a port of its own, over a data directory or a
/// PostgreSQL database.
final class RelayProcess {
    let sandbox: Sandbox
    /// The data directory, or the PostgreSQL URL.
    let data: String
    /// The PostgreSQL server of a relay started `on: .postgres`, which lives as long as the relay.
    let postgres: PostgresServer?
    private let storageArguments: [String]
    private(set) var run: BackgroundRun
    private(set) var port: Int

    /// Starts a relay on `port` (0: any free port) over `data`, and waits until it listens.
    convenience init(_ sandbox: Sandbox, data: String, port: Int = 0, options: [String] = [], sourceLocation: SourceLocation = #_sourceLocation) throws {
        try self.init(sandbox, storage: ["--data", data], described: data + "/relay.db", port: port, options: options, sourceLocation: sourceLocation)
    }

    /// Starts a relay node on the PostgreSQL database at `postgres`.
    convenience init(_ sandbox: Sandbox, postgres: String, options: [String] = [], sourceLocation: SourceLocation = #_sourceLocation) throws {
        try self.init(sandbox, storage: ["--postgres", postgres], described: postgres, port: 0, options: options, sourceLocation: sourceLocation)
    }

    /// Starts a relay on a back end of its own: a data directory in the sandbox, or a PostgreSQL
    /// server started for it.
    convenience init(_ sandbox: Sandbox, on backEnd: RelayBackEnd, options: [String] = [], sourceLocation: SourceLocation = #_sourceLocation) throws {
        switch backEnd {
        case .embedded:
            try self.init(sandbox, data: sandbox.path("relay"), options: options, sourceLocation: sourceLocation)
        case .postgres:
            let server = try PostgresServer(sourceLocation: sourceLocation)
            try self.init(sandbox, storage: ["--postgres", server.url], described: server.url, port: 0, options: options, postgres: server, sourceLocation: sourceLocation)
        }
    }

    private init(
        _ sandbox: Sandbox, storage: [String], described: String, port: Int, options: [String], postgres: PostgresServer? = nil,
        sourceLocation: SourceLocation
    ) throws {
        self.sandbox = sandbox
        self.postgres = postgres
        data = storage[1]
        storageArguments = storage + options
        (run, self.port) = try Self.start(sandbox, storageArguments, described: described, port: port, sourceLocation: sourceLocation)
    }

    var url: String { "http://127.0.0.1:\(port)" }

    private var described: String { storageArguments[0] == "--data" ? data + "/relay.db" : data }

    private static func start(_ sandbox: Sandbox, _ storage: [String], described: String, port: Int, sourceLocation: SourceLocation) throws -> (BackgroundRun, Int) {
        let run = try sandbox.start(["relay", "--listen", "127.0.0.1:\(port)"] + storage)
        // Its first line, but for the one of its metrics' listener (--metrics), which may come first.
        let relaying = /^relaying (.+) on 127\.0\.0\.1:(\d+); stop with Ctrl-C$/
        #expect(eventually(timeout: 30) { run.stdout.split(separator: "\n").contains { $0.hasPrefix("relaying ") } || !run.isRunning }, sourceLocation: sourceLocation)
        let first = String(run.stdout.split(separator: "\n").first { !$0.hasPrefix("serving metrics on ") } ?? "")
        let match = try #require(first.firstMatch(of: relaying), "\(run.stdout) \(run.stderr)", sourceLocation: sourceLocation)
        #expect(String(match.1) == described, sourceLocation: sourceLocation)
        return (run, Int(match.2)!)
    }

    /// Kills the relay with SIGKILL and starts it again on the same port and storage.
    func restart(sourceLocation: SourceLocation = #_sourceLocation) throws {
        run.send(SIGKILL)
        _ = run.wait(timeout: 20)
        // The port is free once the process is gone; another process may take it meanwhile, in
        // theory: the relay then fails to start and the test says so.
        (run, port) = try Self.start(sandbox, storageArguments, described: described, port: port, sourceLocation: sourceLocation)
    }

    /// Stops it with SIGTERM, runs `change` (on its files, say), and starts it again on the same
    /// port and storage.
    func whileStopped(_ change: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let stopped = stop()
        #expect(stopped.succeeded, "\(stopped)", sourceLocation: sourceLocation)
        try change()
        (run, port) = try Self.start(sandbox, storageArguments, described: described, port: port, sourceLocation: sourceLocation)
    }

    /// Stops it with SIGTERM; what it printed.
    func stop() -> RunResult {
        run.send(SIGTERM)
        return run.wait(timeout: 30)
    }
}

/// Requests of SPEC.md §16.3 made by hand, signed or not, to see what a relay refuses.
struct RawRelayRequests {
    let url: String

    struct Answer {
        var status: Int
        var body: String
        var json: [String: Any]? { try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] }
    }

    /// Sends one request and waits for its answer (off the threads tasks share: `runOffThePool`).
    func send(_ method: HTTPMethod, _ target: String, body: [UInt8] = [], signedWith key: SyncKey? = nil, header: String? = nil) throws -> Answer {
        var request = HTTPClientRequest(url: url + target)
        request.method = method
        if let key {
            let credentials = RelayCredentials(key: key)
            request.headers.add(name: "Concord-Auth", value: credentials.authorization(
                method: method.rawValue, target: target, timestampMillis: UInt64(Date().timeIntervalSince1970 * 1000), body: body))
        }
        if let header { request.headers.add(name: "Concord-Auth", value: header) }
        if !body.isEmpty { request.body = .bytes(ByteBuffer(bytes: body)) }
        let prepared = request
        return try runOffThePool {
            let response = try await HTTPClient.shared.execute(prepared, timeout: .seconds(30))
            let bytes = try await response.body.collect(upTo: 1 << 24)
            return Answer(status: Int(response.status.code), body: String(buffer: bytes))
        }
    }
}

extension Store {
    /// The sync key the store holds.
    func syncKey(sourceLocation: SourceLocation = #_sourceLocation) throws -> SyncKey {
        try SyncKey(text: String(try ok("key", "show", sourceLocation: sourceLocation).split(separator: "\n")[0]))
    }

    /// The titles of every reminder the store holds.
    func reminderTitles(sourceLocation: SourceLocation = #_sourceLocation) throws -> Set<String> {
        Set(try reminders(all: true, sourceLocation: sourceLocation).compactMap { $0["title"] as? String })
    }
}

@Suite(.waitsForProcesses) struct RelayCommandTests {
    static var syncLine: Regex<(Substring, Substring, Substring, Substring, Substring, Substring)> { /^synced with (http:\/\/127\.0\.0\.1:\d+): downloaded (\d+) files?, uploaded (\d+), deleted (\d+); (.+)$/ }

    /// Two stores that never meet sync through a relay, which holds only sealed bundles: no title
    /// it relays is in its files. A replica's coalesced files leave the relay too.
    @Test(arguments: RelayBackEnd.allCases)
    func twoStoresSyncThroughARelayThatHoldsNothingItCanRead(on backEnd: RelayBackEnd) throws {
        let sandbox = try Sandbox()
        let (a, b) = try sandbox.makePairedStores()
        let relay = try RelayProcess(sandbox, on: backEnd)
        try a.addReminder("call the plumber about the leak", "--tag", "home")
        try b.addNote("the door code is 4711")

        let first = try a.ok("sync", "--relay", relay.url)
        let match = try #require(first.wholeMatch(of: Self.syncLine), "\(first)")
        #expect(String(match.1) == relay.url && match.2 == "0" && match.3 == "1" && match.4 == "0", "\(first)")
        #expect(match.5.hasPrefix("published "), "\(first)")
        let second = try b.ok("sync", "--relay", relay.url + "/")
        #expect(second.hasPrefix("synced with \(relay.url): downloaded 1 file, uploaded 1, deleted 0; imported "), "a / at the end is dropped: \(second)")
        #expect(try a.ok("sync", "--relay", relay.url).hasPrefix("synced with \(relay.url): downloaded 1 file, uploaded 0, deleted 0; imported "))
        #expect(try a.dump() == (try b.dump()))
        #expect(try a.ok("sync", "--relay", relay.url) == "synced with \(relay.url): downloaded 0 files, uploaded 0, deleted 0; up to date")

        // More than 32 files of a's own: a coalesces them, and the relay loses them too.
        var deleted = 0
        for round in 1...34 {
            try a.addReminder("reminder \(round)")
            let line = try a.ok("sync", "--relay", relay.url)
            deleted += Int(try #require(line.wholeMatch(of: Self.syncLine), "\(line)").4)!
        }
        #expect(deleted >= 32, "a's coalesced files left the relay: \(deleted)")
        let synced = try b.ok("sync", "--relay", relay.url)
        #expect(synced.contains("imported 34 operations") || synced.contains("imported "), "\(synced)")
        #expect(try a.dump() == (try b.dump()))
        let mirror = RelaySync.mirror(of: a.path, url: relay.url, space: RelayCredentials(key: try a.syncKey()).space)
        let mirrors = try FileManager.default.contentsOfDirectory(atPath: sandbox.root.path).filter { $0.hasPrefix("a.db.relay-") }
        #expect(mirrors == [(mirror as NSString).lastPathComponent], "one mirror, named by the URL and the space (SPEC.md §16.5)")
        let ownOnRelay = try bundleNames(in: mirror)
        #expect(ownOnRelay.count <= 33, "\(ownOnRelay)")

        let result = relay.stop()
        #expect(result.succeeded && !result.crashed, "\(result)")
        #expect(result.stderr.isEmpty, "\(result)")
        #expect(result.stdoutLines.last == "stopped", "\(result)")
        let space = RelayCredentials(key: try a.syncKey()).space
        #expect(result.stdoutLines.contains { $0.hasPrefix("stored ") && $0.hasSuffix(" in space \(space)") }, "\(result)")
        #expect(result.stdoutLines.contains { $0.hasPrefix("deleted ") }, "\(result)")

        // What the relay keeps holds no plain text: not its database, not its WAL, not (on
        // PostgreSQL, stopped so that everything is on disk) any file of the cluster.
        let kept: String
        if let postgres = relay.postgres {
            try postgres.stop()
            kept = postgres.directory
        } else {
            kept = relay.data
        }
        let files = try #require(FileManager.default.enumerator(atPath: kept)).compactMap { $0 as? String }
        #expect(!files.isEmpty, "\(files)")
        for name in files {
            guard let bytes = FileManager.default.contents(atPath: kept + "/" + name) else { continue }
            for secret in ["plumber", "4711", "home"] {
                #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(name) holds '\(secret)'")
            }
        }
    }

    /// Without the key, nothing: a request unsigned, signed with another key, or changed on the
    /// way is refused; so is what is not an encrypted bundle, a body over the limit, a name that is
    /// not a bundle's. None of them stores anything.
    @Test(arguments: RelayBackEnd.allCases)
    func strangersAndBadRequestsAreRefusedAndStoreNothing(on backEnd: RelayBackEnd) throws {
        let sandbox = try Sandbox()
        let (a, _) = try sandbox.makePairedStores()
        let relay = try RelayProcess(sandbox, on: backEnd, options: ["--max-file-bytes", "4096"])
        try a.addReminder("a secret")
        _ = try a.ok("sync", "--relay", relay.url)
        let key = try a.syncKey()
        let space = RelayCredentials(key: key).space
        let stranger = SyncKey(bytes: Array(repeating: 9, count: 32))!
        let raw = RawRelayRequests(url: relay.url)
        let files = "/v1/spaces/\(space)/files"
        let name = "0123456789abcdef0123456789abcdef-0000000001.cbundle"
        let sealed: [UInt8] = [0x89, 0x43, 0x4E, 0x43, 0x45, 0x0D, 0x0A, 0x1A, 0x01] + Array(repeating: 0, count: 80)

        let health = try raw.send(.GET, "/v1/health")
        #expect(health.status == 200 && health.body == "{\"status\":\"ok\"}\n", "\(health)")
        let listed = try raw.send(.GET, files, signedWith: key)
        #expect(listed.status == 200, "\(listed)")
        let before = try #require(listed.json)
        #expect((before["files"] as? [Any])?.count == 1, "\(listed)")

        func expectRefusal(_ answer: RawRelayRequests.Answer, _ status: Int, _ code: String, _ message: String, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(answer.status == status, "\(answer)", sourceLocation: sourceLocation)
            #expect(answer.json?["error"] as? String == code, "\(answer)", sourceLocation: sourceLocation)
            #expect((answer.json?["message"] as? String)?.contains(message) == true, "\(answer)", sourceLocation: sourceLocation)
            #expect(answer.body.hasSuffix("}\n") && answer.body.hasPrefix("{\"error\":"), "canonical JSON and a newline: \(answer.body)", sourceLocation: sourceLocation)
        }
        expectRefusal(try raw.send(.GET, files), 401, "unauthorized", "the request carries no Concord-Auth header")
        expectRefusal(try raw.send(.GET, files, signedWith: stranger), 401, "unauthorized", "does not name space \(space)")
        expectRefusal(try raw.send(.PUT, files + "/" + name, body: sealed, signedWith: stranger), 401, "unauthorized", "does not name space")
        expectRefusal(try raw.send(.DELETE, "/v1/spaces/\(space)", signedWith: stranger), 401, "unauthorized", "does not name space")
        expectRefusal(try raw.send(.GET, files, header: "v1 00 1 00"), 401, "unauthorized", "is not 'v1 PUBLIC-KEY TIME SIGNATURE'")
        // Signed for one file, sent for another.
        let credentials = RelayCredentials(key: key)
        let signedForOther = credentials.authorization(method: "PUT", target: files + "/" + name.replacingOccurrences(of: "0001.", with: "0002."), timestampMillis: UInt64(Date().timeIntervalSince1970 * 1000), body: sealed)
        expectRefusal(try raw.send(.PUT, files + "/" + name, body: sealed, header: signedForOther), 401, "unauthorized", "does not match the request")
        let stale = credentials.authorization(method: "GET", target: files, timestampMillis: UInt64(Date().timeIntervalSince1970 * 1000) - 600_000, body: [UInt8]())
        expectRefusal(try raw.send(.GET, files, header: stale), 401, "unauthorized", "from the relay's clock (at most 300 s)")

        expectRefusal(try raw.send(.PUT, files + "/" + name, body: Array("plain text".utf8), signedWith: key), 400, "badRequest", "a relay stores only encrypted bundles")
        expectRefusal(try raw.send(.PUT, files + "/" + name, body: sealed + Array(repeating: 0, count: 4096), signedWith: key), 413, "tooLarge", "at most 4096 bytes")
        expectRefusal(try raw.send(.PUT, files + "/notes.txt", body: sealed, signedWith: key), 400, "badRequest", "a file is named as in a shared folder")
        expectRefusal(try raw.send(.GET, "/v1/spaces/NOTASPACE/files", signedWith: key), 400, "badRequest", "a space is named by 32 lowercase hex digits")
        expectRefusal(try raw.send(.GET, files + "?cursor=1", signedWith: key), 400, "badRequest", "cursor=C and wait=W")
        expectRefusal(try raw.send(.GET, files + "?cursor=1&wait=-1", signedWith: key), 400, "badRequest", "cursor=C and wait=W")
        expectRefusal(try raw.send(.GET, files + "/" + name, signedWith: key), 404, "notFound", "holds no file \(name)")
        expectRefusal(try raw.send(.DELETE, files + "/" + name, signedWith: key), 404, "notFound", "holds no file \(name)")
        let deletions = "/v1/spaces/\(space)/deletions"
        func names(_ names: [String]) -> [UInt8] { Array("{\"names\":[\(names.map { "\"\($0)\"" }.joined(separator: ","))]}".utf8) }
        let badDeletions = "deletions are a JSON object {\"names\":[NAME…]} of 1 to 1000 file names"
        expectRefusal(try raw.send(.POST, deletions, body: names([name]), signedWith: stranger), 401, "unauthorized", "does not name space")
        expectRefusal(try raw.send(.POST, deletions, body: names([]), signedWith: key), 400, "badRequest", badDeletions)
        expectRefusal(try raw.send(.POST, deletions, body: Array("[\"\(name)\"]".utf8), signedWith: key), 400, "badRequest", badDeletions)
        expectRefusal(try raw.send(.POST, deletions, body: names([name, "notes.txt"]), signedWith: key), 400, "badRequest", badDeletions)
        expectRefusal(try raw.send(.POST, deletions, body: names(Array(repeating: name, count: 1001)), signedWith: key), 400, "badRequest", badDeletions)
        expectRefusal(try raw.send(.POST, deletions, body: Array(repeating: 0x20, count: 65_537), signedWith: key), 413, "tooLarge", "at most 65536 bytes")

        let after = try raw.send(.GET, files, signedWith: key)
        #expect(after.body == listed.body, "nothing was stored or deleted")
        #expect(relay.run.isRunning)

        // A stored file, then another one under its name, then the same again.
        let stored = try raw.send(.PUT, files + "/" + name, body: sealed, signedWith: key)
        #expect(stored.status == 201 && stored.json?["size"] as? Int == sealed.count, "\(stored)")
        let again = try raw.send(.PUT, files + "/" + name, body: sealed, signedWith: key)
        #expect(again.status == 200 && again.body == stored.body, "\(again)")
        expectRefusal(try raw.send(.PUT, files + "/" + name, body: sealed + [1], signedWith: key), 409, "nameTaken", "holds another file named \(name)")
        let got = try raw.send(.GET, files + "/" + name, signedWith: key)
        #expect(got.status == 200 && Array(got.body.utf8).count > 0)
        // A device that syncs skips it: it is sealed with nothing it can open.
        let sync = try a.run("sync", "--relay", relay.url)
        #expect(sync.succeeded, "\(sync)")
        #expect(sync.stderr.contains("skipping \(name)"), "\(sync)")
        // Deleted with a request of deletions, which names a file the space does not hold too:
        // one transaction, which moves the cursor once, and answers those it held.
        let cursor = try #require(try raw.send(.GET, files, signedWith: key).json?["cursor"] as? Int)
        let absent = name.replacingOccurrences(of: "0001.", with: "0002.")
        let deletedFiles = try raw.send(.POST, deletions, body: names([absent, name]), signedWith: key)
        #expect(deletedFiles.status == 200 && deletedFiles.body == "{\"deleted\":[\"\(name)\"]}\n", "\(deletedFiles)")
        let afterDeletions = try #require(try raw.send(.GET, files, signedWith: key).json)
        #expect(afterDeletions["cursor"] as? Int == cursor + 1 && (afterDeletions["files"] as? [Any])?.count == 1, "\(afterDeletions)")
        let deleted = try raw.send(.DELETE, "/v1/spaces/\(space)", signedWith: key)
        #expect(deleted.status == 200 && deleted.json?["deleted"] as? Int == 1, "\(deleted)")
    }

    /// `--metrics`: sums over every space, in Prometheus's text format, that name no space or file.
    @Test func aRelayCountsWhatItDoesForPrometheus() throws {
        let sandbox = try Sandbox()
        let (a, b) = try sandbox.makePairedStores()
        let relay = try RelayProcess(sandbox, on: .embedded, options: ["--metrics", "127.0.0.1:0"])
        #expect(eventually(timeout: 10) { relay.run.stdout.contains("serving metrics on ") })
        let port = try #require(relay.run.stdout.firstMatch(of: /serving metrics on http:\/\/127\.0\.0\.1:(\d+)\/metrics\n/)?.1)
        try a.addReminder("counted, not read")
        _ = try a.ok("sync", "--relay", relay.url)
        _ = try b.ok("sync", "--relay", relay.url)
        let listed = try #require(try RawRelayRequests(url: relay.url).send(.GET, "/v1/spaces/\(RelayCredentials(key: try a.syncKey()).space)/files", signedWith: try a.syncKey()).json)
        let file = try #require((listed["files"] as? [[String: Any]])?.first)

        // A request is counted once its answer is written: scraped until b's download is.
        let download = #"hb_requests{http_route="/v1/spaces/{space}/files/{name}",http_request_method="GET",http_response_status_code="200"}"#
        var scraped = RawRelayRequests.Answer(status: 0, body: "")
        var values: [String: Double] = [:]
        #expect(try eventually(timeout: 10) {
            scraped = try RawRelayRequests(url: "http://127.0.0.1:\(port)").send(.GET, "/metrics")
            values = [:]
            for line in scraped.body.split(separator: "\n") where !line.hasPrefix("#") {
                let parts = line.split(separator: " ")
                values[String(parts[0])] = Double(parts[1])
            }
            return scraped.status == 200 && values[download] == 1
        }, "\(scraped)")
        #expect(values["concord_relay_files_stored_total"] == 1, "\(scraped.body)")
        #expect(values["concord_relay_bytes_stored_total"] == Double(try #require(file["size"] as? Int)))
        #expect(values["concord_relay_files_deleted_total"] == 0)
        #expect(values["concord_relay_waiting_listings"] == 0)
        #expect(values["concord_relay_storage_failures_total"] == 0)
        #expect(values[#"hb_requests{http_route="/v1/spaces/{space}/files/{name}",http_request_method="PUT",http_response_status_code="201"}"#] == 1)
        for secret in [try #require(file["name"] as? String), RelayCredentials(key: try a.syncKey()).space] {
            #expect(!scraped.body.contains(secret), "no space's or file's name")
        }
        let stopped = relay.stop()
        #expect(stopped.succeeded && stopped.stdoutLines.last == "stopped", "\(stopped)")
    }

    /// A relay that refuses, or is not there, fails the sync with one line, and the next sync goes on.
    @Test(arguments: RelayBackEnd.allCases)
    func aRefusingOrMissingRelayFailsTheSyncWithOneLine(on backEnd: RelayBackEnd) throws {
        let sandbox = try Sandbox()
        let (a, b) = try sandbox.makePairedStores()
        let relay = try RelayProcess(sandbox, on: backEnd, options: ["--quota-files", "1"])
        try a.addReminder("from a")
        try b.addReminder("from b")
        _ = try a.ok("sync", "--relay", relay.url)
        let space = RelayCredentials(key: try a.syncKey()).space
        let full = try b.run("sync", "--relay", relay.url)
        expectOneLineFailure(full, mentions: ["the relay at \(relay.url) refused: space \(space) is full: it holds ", " bytes in 1 files, and may hold 1073741824 bytes in 1 files (507 spaceFull)"], code: 1)
        #expect(try b.reminderTitles() == ["from a", "from b"], "what b downloaded before the refusal was merged")

        let c = try sandbox.makeStore("c.db")
        try c.expectRefused(["sync", "--relay", relay.url], mentions: ["has no sync key"], code: 1)
        try b.expectRefused(["sync", "--relay", "ftp://127.0.0.1:1"], mentions: ["'ftp://127.0.0.1:1' is not a relay's URL"], code: 64)
        try b.expectRefused(["sync", "--relay", relay.url + "/path"], mentions: ["is not a relay's URL"], code: 64)
        try b.expectRefused(["sync", "--relay", relay.url, "--watch"], mentions: ["--relay"], code: 64)

        _ = relay.stop()
        let gone = try b.run("sync", "--relay", relay.url)
        expectOneLineFailure(gone, mentions: ["cannot reach the relay at \(relay.url)"], code: 1)
    }

    /// `wipe --yes --relay URL` deletes this replica's uploads from the relay and its mirrors
    /// from this machine; a relay that cannot be reached, or a store without a key, stops it
    /// before anything is removed.
    @Test func wipeDeletesThisReplicasUploadsAndMirrors() throws {
        let sandbox = try Sandbox()
        let (a, b) = try sandbox.makePairedStores()
        let relay = try RelayProcess(sandbox, data: sandbox.path("relay"))
        try a.addReminder("from a")
        try b.addReminder("from b")
        for store in [a, b, a] { _ = try store.ok("sync", "--relay", relay.url) }
        let replicaA = try a.replicaID()
        let key = try a.syncKey()
        let files = "/v1/spaces/\(RelayCredentials(key: key).space)/files"
        let raw = RawRelayRequests(url: relay.url)
        func names() throws -> [String] {
            let listing = try raw.send(.GET, files, signedWith: key)
            return ((listing.json?["files"] as? [[String: Any]]) ?? []).compactMap { $0["name"] as? String }
        }
        let before = try names()
        #expect(before.filter { $0.hasPrefix(replicaA) }.count == 1, "\(before) \(replicaA)")

        // Refused, with nothing removed: a relay not there; a store without a key.
        let elsewhere = "http://127.0.0.1:9"
        try a.expectRefused(["wipe", "--yes", "--relay", elsewhere], mentions: ["cannot reach the relay at \(elsewhere)"], code: 1)
        #expect(FileManager.default.fileExists(atPath: a.path))
        let keyless = try sandbox.makeStore("keyless.db")
        try keyless.expectRefused(["wipe", "--yes", "--relay", relay.url], mentions: ["has no sync key"], code: 1)
        #expect(FileManager.default.fileExists(atPath: keyless.path))

        let wiped = try a.ok("wipe", "--yes", "--relay", relay.url)
        let lines = wiped.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("removed \(replicaA)-") == true && lines.first?.hasSuffix(".cbundle from \(relay.url)") == true, "\(wiped)")
        #expect(lines.contains { $0.hasPrefix("removed \(a.path).relay-") }, "the mirror: \(wiped)")
        #expect(lines.last == "wiped replica \(replicaA) from this machine", "\(wiped)")
        let after = try names()
        #expect(after == before.filter { !$0.hasPrefix(replicaA) }, "b's file stays")
        let left = try FileManager.default.contentsOfDirectory(atPath: sandbox.root.path).filter { $0.hasPrefix("a.db") }
        #expect(left.isEmpty, "\(left)")
        // b keeps everything it holds, and publishes again what the relay lost of it.
        #expect(try b.reminderTitles() == ["from a", "from b"])
        _ = relay.stop()
    }
}

