import Foundation
import Testing

/// `syncctl replica list` and `replica retire` (SPEC.md §5.8, §11): what a store knows of the
/// others, and a retired replica that refuses to write or sync until it is forked.
@Suite(.waitsForProcesses) struct ReplicaCommandTests {
    func replicaID(_ store: Store) throws -> String {
        try #require(try store.status().string("replica"))
    }

    @Test func listRetireAndComeBackUnderANewID() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let folder = sandbox.path("shared")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        _ = try a.addReminder("milk", "--tag", "home")
        _ = try b.addReminder("eggs")
        for store in [a, b, a] { try store.ok("sync", "--folder", folder) }
        let (aID, bID) = (try replicaID(a), try replicaID(b))

        let lines = try a.ok("replica", "list").split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(lines)")
        #expect(lines.contains("\(aID)  this replica; wrote 6 operations"), "\(lines)")
        let bLine = try #require(lines.first { $0.hasPrefix(bID) })
        #expect(bLine.wholeMatch(of: /[0-9a-f]{32}  wrote 5 operations; last heard from \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z, holding every operation this store holds/) != nil, "\(bLine)")
        #expect(lines.last == "stable through 11 of the 11 operations this store holds")
        let json = try jsonObject(try a.ok("replica", "list", "--json"))
        #expect(json.int("heldOperations") == 11 && json.int("stableOperations") == 11)
        let replicas = try #require(json["replicas"] as? [[String: Any]])
        #expect(replicas.map { $0.string("id") } == [aID, bID].sorted())
        let own = try #require(replicas.first { $0.string("id") == aID })
        #expect(own.bool("local") == true && own.isNull("heardAt") && own.int("lacks") == 0 && own.int("wrote") == 6)

        // A writes on; b, silent, now lacks it.
        _ = try a.addReminder("bread")
        #expect(try a.ok("replica", "list").contains("\(bID)  wrote 5 operations; last heard from"))
        #expect(try a.ok("replica", "list").contains(", lacking 5 operations this store holds"))

        try a.expectRefused(["replica", "retire", aID], mentions: ["a replica cannot retire itself"], code: 1)
        try a.expectRefused(["replica", "retire", "zz"], mentions: ["a replica id is 32 hex digits, or at least the first 4 of them, not 'zz'"], code: 64)
        try a.expectRefused(["replica", "retire", "0000"], mentions: ["no replica this store knows of has an id starting with 0000"], code: 1)
        #expect(try a.ok("replica", "retire", String(bID.prefix(6)).uppercased()) == "retired replica \(bID)")
        #expect(try a.ok("replica", "retire", bID) == "replica \(bID) was retired already")
        #expect(try a.ok("replica", "list").contains("\(bID)  wrote 5 operations; retired"))

        // B merges its retirement with its next sync, then refuses to write or sync.
        try a.ok("sync", "--folder", folder)
        try b.ok("sync", "--folder", folder)
        #expect(try b.ok("replica", "list").contains("\(bID)  this replica; wrote 5 operations; retired"))
        let retired = "replica \(bID) was retired by another replica: it writes and syncs no more until it continues under a new id; run 'syncctl init --fork' to go on as a new replica, keeping what this store holds"
        for arguments in [["reminder", "add", "refused"], ["sync", "--folder", folder]] {
            let result = try b.expectRefused(arguments, code: 1)
            #expect(result.stderrLines == ["syncctl: \(retired)"])
        }
        #expect(try b.dump().contains(#"{"id":"\#(bID)","kind":"replica","retired":true}"#))

        // Forked, it writes and syncs again, and a learns of the new replica.
        try b.ok("init", "--fork")
        _ = try b.addReminder("back")
        try b.ok("sync", "--folder", folder)
        try a.ok("sync", "--folder", folder)
        #expect(try a.reminders().contains { $0.string("title") == "back" })
        let newID = try replicaID(b)
        #expect(try a.ok("replica", "list").contains("\(newID)  wrote 5 operations; last heard from"))
        #expect(try a.dump() == b.dump())
    }
}
