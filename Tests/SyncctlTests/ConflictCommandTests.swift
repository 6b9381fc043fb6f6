import Foundation
import Testing

/// `syncctl conflicts`, `history` and `resolve` (SPEC.md §5.1 "Heads and conflicts", §10
/// "Conflicts" and "History", §11): a field written on two replicas that had not seen each other's
/// write is listed on both, the same byte for byte; resolving it on one settles it on both once
/// they sync; edits one after another never conflict; a refused resolve writes nothing; a deleted
/// record's conflicts are not listed.
@Suite(.waitsForProcesses) struct ConflictCommandTests {
    /// The manual run of the feature: "Buy milk" retitled on a and on b between two syncs.
    @Test func aTitleEditedOnTwoReplicasIsListedOnBothAndKeepSettlesItOnBoth() throws {
        let f = try TwoReplicas()
        try f.a.ok("reminder", "edit", f.id, "--title", "Buy oat milk")
        try f.b.ok("reminder", "edit", f.id, "--title", "Buy almond milk")
        try f.syncAll()

        let json = try f.a.ok("conflicts", "--json")
        #expect(try f.b.ok("conflicts", "--json") == json, "replicas that hold the same operations list the same conflicts")
        let conflicts = try parseConflicts(json)
        try #require(conflicts.count == 1, "\(json)")
        let conflict = conflicts[0]
        #expect(conflict.kind == "reminder" && conflict.id == f.id && conflict.field == "title")
        try #require(conflict.heads.count == 2, "\(json)")
        #expect(Set(conflict.heads.map(\.value)) == [#""Buy oat milk""#, #""Buy almond milk""#])
        #expect(conflict.heads.first { $0.replica == f.aID }?.value == #""Buy oat milk""#)
        #expect(conflict.heads.first { $0.replica == f.bID }?.value == #""Buy almond milk""#)
        #expect(
            (conflict.heads[0].timestamp, conflict.heads[0].replica) > (conflict.heads[1].timestamp, conflict.heads[1].replica),
            "the value shown is the greatest stamp's (timestamp, then replica id): \(json)")
        // The value shown is the one every other command shows.
        let shown = conflict.heads[0]
        for store in [f.a, f.b] {
            #expect(OrderedJSON.quote(try store.show(f.id).string("title") ?? "") == shown.value)
        }
        // The text form says the same, with this replica marked.
        #expect(try f.a.ok("conflicts") == conflictText(conflicts, this: f.aID))
        #expect(try f.b.ok("conflicts") == conflictText(conflicts, this: f.bID))
        #expect(try f.a.ok("conflicts").contains("by \(f.aID) (this replica) at "))

        // Keep the value that is not shown, on b: settled there at once, on a once it syncs.
        let other = conflict.heads[1]
        let result = try f.b.ok("resolve", f.id, "--field", "title", "--keep", String(other.replica.prefix(8)))
        #expect(result == "reminder \(f.id) title = \(other.value)")
        #expect(try f.b.ok("conflicts") == "no conflicts")
        #expect(try f.a.ok("conflicts", "--json") == json, "a has not heard of the resolve yet")
        try f.syncAll()
        for store in [f.a, f.b] {
            #expect(try store.ok("conflicts") == "no conflicts")
            #expect(try store.ok("conflicts", "--json") == "[]")
            #expect(OrderedJSON.quote(try store.show(f.id).string("title") ?? "") == other.value)
        }
        #expect(try f.a.dump() == (try f.b.dump()))
        try f.a.expectSound("after the resolve")
    }

    /// `--value` writes a value of its own: a priority by name, text as it is for the
    /// title. Two fields in conflict in one record are listed in code order, and are resolved on
    /// different replicas at once without a new conflict.
    @Test func valueSettlesAFieldWithAValueOfItsOwn() throws {
        let f = try TwoReplicas()
        try f.a.ok("reminder", "edit", f.id, "--title", "Buy oat milk", "--priority", "high", "--due", "2026-12-02T09:00:00Z")
        try f.b.ok("reminder", "edit", f.id, "--title", "Buy almond milk", "--priority", "low", "--due", "2026-12-03T09:00:00Z")
        try f.syncAll()
        // The raw register value as JSON (SPEC.md §11): an instant as its milliseconds.
        #expect(try f.a.ok("resolve", f.id, "--field", "due", "--value", "2026-12-01T09:00:00Z") == "reminder \(f.id) due = 1796115600000")
        try f.syncAll()
        let json = try f.a.ok("conflicts", "--json")
        #expect(try f.b.ok("conflicts", "--json") == json)
        let conflicts = try parseConflicts(json)
        #expect(conflicts.map(\.field) == ["title", "priority"], "\(json)")
        #expect(Set(conflicts.last?.heads.map(\.value) ?? []) == ["3", "1"], "priorities are integers: \(json)")

        #expect(try f.a.ok("resolve", f.id, "--field", "priority", "--value", "medium") == "reminder \(f.id) priority = 2")
        #expect(try f.b.ok("resolve", f.id, "--field", "title", "--value", "Buy both, 2 \"litres\"")
            == #"reminder \#(f.id) title = "Buy both, 2 \"litres\"""#)
        #expect(try parseConflicts(try f.a.ok("conflicts", "--json")).map(\.field) == ["title"])
        #expect(try parseConflicts(try f.b.ok("conflicts", "--json")).map(\.field) == ["priority"])
        try f.syncAll()
        for store in [f.a, f.b] {
            #expect(try store.ok("conflicts") == "no conflicts")
            let reminder = try store.show(f.id)
            #expect(reminder.string("priority") == "medium")
            #expect(reminder.string("title") == "Buy both, 2 \"litres\"")
        }
        #expect(try f.a.dump() == (try f.b.dump()))
    }

    /// `history ID`: every operation of the record, oldest stamp first, as `log` prints it plus its
    /// standing; `conflict` for the head that is not shown. After a resolve, the resolution holds
    /// and every title before it is superseded. The same on both replicas, text and JSON.
    @Test func historyShowsTheCompetingTitlesAndThenTheResolution() throws {
        let f = try TwoReplicas()
        try f.a.ok("reminder", "edit", f.id, "--title", "Buy oat milk")
        try f.b.ok("reminder", "edit", f.id, "--title", "Buy almond milk")
        try f.syncAll()
        let heads = try #require(try parseConflicts(try f.a.ok("conflicts", "--json")).first).heads
        try #require(heads.count == 2)
        let (winner, loser) = (heads[0], heads[1])

        let text = try f.a.ok("history", f.id)
        #expect(try f.b.ok("history", f.id) == text)
        let json = try f.a.ok("history", f.id, "--json")
        #expect(try f.b.ok("history", f.id, "--json") == json)
        try checkHistory(text: text, json: json, store: f.a, id: f.id)
        #expect(titleLines(text) == [
            #"title = "Buy milk"  superseded"#,
            "title = \(loser.value)  conflict",
            "title = \(winner.value)  holds",
        ])
        #expect(!text.split(separator: "\n").contains { $0.hasSuffix("  superseded") && !$0.contains("title = ") }, "only the first title is overwritten: \(text)")
        let titles = try parseHistory(json).filter { $0["field"]?.stringValue == "title" }
        #expect(titles.map { $0["replica"]?.stringValue } == [f.aID, loser.replica, winner.replica])
        #expect(titles.map { $0["standing"]?.stringValue } == ["superseded", "conflict", "holds"])
        #expect(titles.map { $0["value"]?.canonical } == [#""Buy milk""#, loser.value, winner.value])

        // Resolved on b, keeping a's title.
        try f.b.ok("resolve", f.id, "--field", "title", "--keep", String(f.aID.prefix(8)))
        try f.syncAll()
        let after = try f.a.ok("history", f.id)
        #expect(try f.b.ok("history", f.id) == after)
        let afterJSON = try f.a.ok("history", f.id, "--json")
        #expect(try f.b.ok("history", f.id, "--json") == afterJSON)
        try checkHistory(text: after, json: afterJSON, store: f.b, id: f.id)
        #expect(titleLines(after) == [
            #"title = "Buy milk"  superseded"#,
            "title = \(loser.value)  superseded",
            "title = \(winner.value)  superseded",
            #"title = "Buy oat milk"  holds"#,
        ])
        #expect(!after.contains("  conflict\n") && !after.hasSuffix("  conflict"), "\(after)")
        let resolution = try #require(try parseHistory(afterJSON).last)
        #expect(resolution["replica"]?.stringValue == f.bID)
        #expect(resolution["field"]?.stringValue == "title" && resolution["value"]?.stringValue == "Buy oat milk")
        #expect(resolution["standing"]?.stringValue == "holds")
        // It has seen a's head (b's own is seen by its seq, §5.1 rule 3).
        let aHead = try #require(heads.first { $0.replica == f.aID })
        #expect(resolution["predecessors"]?.items.contains(.string("\(f.aID):\(aHead.seq)")) == true, "\(resolution.canonical)")
    }

    /// Edits one after another, each by a replica that held the one before, never conflict; nor
    /// do edits of different fields, or a replica's own edits one after another.
    @Test func editsOneAfterAnotherAreNoConflict() throws {
        let f = try TwoReplicas()
        try f.a.ok("reminder", "edit", f.id, "--title", "Buy oat milk")
        try f.a.ok("sync", "--folder", f.folder)
        try f.b.ok("sync", "--folder", f.folder)
        try f.b.ok("reminder", "edit", f.id, "--title", "Buy almond milk")
        try f.b.ok("sync", "--folder", f.folder)
        try f.a.ok("sync", "--folder", f.folder)
        for store in [f.a, f.b] {
            #expect(try store.ok("conflicts") == "no conflicts")
            #expect(try store.ok("conflicts", "--json") == "[]")
            #expect(try store.show(f.id).string("title") == "Buy almond milk")
        }
        #expect(titleLines(try f.a.ok("history", f.id)) == [
            #"title = "Buy milk"  superseded"#, #"title = "Buy oat milk"  superseded"#, #"title = "Buy almond milk"  holds"#,
        ])

        // Different fields at once, and two edits of the title on one replica before a sync.
        try f.a.ok("reminder", "edit", f.id, "--notes", "the big carton")
        try f.a.ok("reminder", "edit", f.id, "--title", "Buy soy milk")
        try f.a.ok("reminder", "edit", f.id, "--title", "Buy rice milk")
        try f.b.ok("reminder", "edit", f.id, "--priority", "high")
        try f.syncAll()
        for store in [f.a, f.b] {
            #expect(try store.ok("conflicts") == "no conflicts")
            let reminder = try store.show(f.id)
            #expect(reminder.string("title") == "Buy rice milk" && reminder.string("notes") == "the big carton" && reminder.string("priority") == "high")
        }
        #expect(try f.a.dump() == (try f.b.dump()))
    }

    /// Each refused with one line naming the problem, nothing on stdout, the store unchanged, and
    /// the conflicts still listed as before.
    @Test func badInputIsRefusedAndWritesNothing() throws {
        let f = try TwoReplicas()
        try f.a.ok("reminder", "edit", f.id, "--title", "Buy oat milk", "--priority", "high")
        try f.b.ok("reminder", "edit", f.id, "--title", "Buy almond milk", "--priority", "low")
        try f.syncAll()
        // A replica that exists but wrote neither value.
        let c = try f.sandbox.makeStore("c.db")
        let cPrefix = String(try c.replicaID().prefix(8))
        try #require(!f.aID.hasPrefix(cPrefix) && !f.bID.hasPrefix(cPrefix))
        let before = try f.a.ok("conflicts", "--json")
        #expect(try parseConflicts(before).map(\.field) == ["title", "priority"])
        let aPrefix = String(f.aID.prefix(8))
        let unknown = unusedID(avoiding: f.id)

        try f.a.expectRefused(["resolve", f.id, "--field", "notes", "--value", "x"], mentions: ["reminder \(f.id) has no conflict in field 'notes'"], code: 1)
        try f.a.expectRefused(["resolve", f.id, "--field", "nonsense", "--value", "x"], mentions: ["no conflict in field 'nonsense'"], code: 1)
        try f.a.expectRefused(["resolve", f.id, "--field", "title", "--keep", cPrefix], mentions: [cPrefix], code: 1)
        try f.a.expectRefused(["resolve", f.id, "--field", "title", "--keep", String(f.aID.prefix(3))], mentions: [String(f.aID.prefix(3))], code: 1)
        try f.a.expectRefused(["resolve", f.id, "--field", "title"], mentions: ["--value", "--keep"], code: 64)
        try f.a.expectRefused(["resolve", f.id, "--field", "title", "--value", "x", "--keep", aPrefix], mentions: ["--value", "--keep"], code: 64)
        for wrong in ["2", "urgent", "true", "\"2\""] {
            try f.a.expectRefused(["resolve", f.id, "--field", "priority", "--value", wrong], mentions: [wrong, "priority"], code: 1)
        }
        // A value another field's command would refuse: an empty title, a date that is not one.
        try f.a.expectRefused(["resolve", f.id, "--field", "title", "--value", ""], mentions: ["the title is empty"], code: 1)
        try f.a.expectRefused(["resolve", unknown, "--field", "title", "--value", "x"], mentions: ["no record with id \(unknown)"], code: 1)
        try f.a.expectRefused(["history", unknown], mentions: ["no record with id \(unknown)"], code: 1)
        try f.a.expectRefused(["history", unknown, "--json"], mentions: ["no record with id \(unknown)"], code: 1)
        #expect(try f.a.ok("conflicts", "--json") == before)
        // The conflicts are still there to resolve.
        try f.a.ok("resolve", f.id, "--field", "title", "--keep", aPrefix)
        #expect(try parseConflicts(try f.a.ok("conflicts", "--json")).map(\.field) == ["priority"])
        try f.a.expectRefused(["resolve", f.id, "--field", "title", "--keep", aPrefix], mentions: ["no conflict in field 'title'"], code: 1)
    }

    /// A record whose title was written on both replicas and deleted on one: deleted everywhere
    /// after the sync, and in no conflict (§10, "A deleted record has no field in conflict"),
    /// whoever asks: `show` and `list --json` say `conflict` false, `conflicts` leaves it out
    /// while another record's conflict is listed, `history` marks the losing head `superseded`,
    /// and `resolve` finds no conflict. A restore brings its conflict back, to all four. A delete
    /// on one replica and a title edit on the other are no conflict at all.
    @Test func aDeletedRecordsConflictsAreNotListed() throws {
        let f = try TwoReplicas()
        let other = try f.a.addReminder("Call mum")
        let plain = try f.a.addReminder("Water plants")
        try f.syncAll()
        try f.a.ok("reminder", "edit", f.id, "--title", "Buy oat milk")
        try f.b.ok("reminder", "edit", f.id, "--title", "Buy almond milk")
        try f.b.ok("reminder", "delete", f.id)
        try f.a.ok("reminder", "edit", other, "--title", "Call mum at six")
        try f.b.ok("reminder", "edit", other, "--title", "Call mum at seven")
        try f.a.ok("reminder", "edit", plain, "--title", "Water the plants")
        try f.b.ok("reminder", "delete", plain)
        try f.syncAll()

        let json = try f.a.ok("conflicts", "--json")
        #expect(try f.b.ok("conflicts", "--json") == json)
        #expect(try parseConflicts(json).map { "\($0.id) \($0.field)" } == ["\(other) title"], "\(json)")
        for store in [f.a, f.b] {
            #expect(try store.show(f.id).bool("deleted") == true)
            #expect(try store.show(f.id).bool("conflict") == false)
            #expect(try store.show(plain).bool("deleted") == true)
            #expect(!(try store.ok("conflicts")).contains(f.id))
            #expect(!(try store.ok("show", f.id)).contains("conflict  yes"))
            let listed = try store.reminders(all: true)
            #expect(listed.first { $0["id"] as? String == f.id }?["conflict"] as? Bool == false, "\(listed)")
            #expect(listed.first { $0["id"] as? String == other }?["conflict"] as? Bool == true, "\(listed)")
        }
        let history = try f.a.ok("history", f.id)
        #expect(history.contains("  deleted = true  holds"), "\(history)")
        #expect(titleLines(history).map { $0.components(separatedBy: "  ").last } == ["superseded", "superseded", "holds"], "\(history)")
        try f.b.expectRefused(
            ["resolve", f.id, "--field", "title", "--keep", String(f.aID.prefix(8))], mentions: ["\(f.id) has no conflict in field 'title'"], code: 1)

        // A restore writes only `deleted`: the title is still in conflict, and listed again.
        try f.a.ok("reminder", "restore", f.id)
        try f.a.ok("reminder", "restore", plain)
        try f.syncAll()
        let restored = try f.b.ok("conflicts", "--json")
        #expect(try f.a.ok("conflicts", "--json") == restored)
        #expect(Set(try parseConflicts(restored).map { "\($0.id) \($0.field)" }) == ["\(f.id) title", "\(other) title"], "\(restored)")
        #expect(try f.b.show(f.id).bool("conflict") == true)
        #expect(titleLines(try f.b.ok("history", f.id)).map { $0.components(separatedBy: "  ").last } == ["superseded", "conflict", "holds"])
        try f.b.ok("resolve", f.id, "--field", "title", "--keep", String(f.aID.prefix(8)))
        #expect(try f.b.show(f.id).bool("conflict") == false)
    }
}

// MARK: Helpers

/// Two replicas, a and b, that share a folder and both hold one reminder, "Buy milk", made on a.
extension ConflictCommandTests {
    /// Two replicas whose ids share their first 30 hex digits (b's id set so in its new store):
    /// `--keep` with 8 of them is ambiguous, and says so, listing both, rather than that it names
    /// none of them.
    @Test func keepThatMatchesSeveralReplicasSaysItIsAmbiguous() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let aID = try a.replicaID()
        let bID = String(aID.dropLast(2)) + (aID.hasSuffix("00") ? "01" : "00")
        try sandbox.python("""
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            old = db.execute("SELECT value FROM meta WHERE key = 'replica_id'").fetchone()[0]
            new = bytes.fromhex(sys.argv[2])
            db.execute("UPDATE meta SET value = ? WHERE key = 'replica_id'", (new,))
            db.execute("UPDATE replicas SET id = ? WHERE id = ?", (new, old))
            db.execute("DELETE FROM meta WHERE key = 'location'")
            db.commit()
            """, [b.path, bID])
        #expect(try b.replicaID() == bID)
        let folder = try sandbox.makeDirectory("shared")
        let id = try a.addReminder("Buy milk")
        try a.ok("sync", "--folder", folder)
        try b.ok("sync", "--folder", folder)
        try a.ok("reminder", "edit", id, "--title", "Buy oat milk")
        try b.ok("reminder", "edit", id, "--title", "Buy soy milk")
        try a.ok("sync", "--folder", folder)
        try b.ok("sync", "--folder", folder)
        let prefix = String(aID.prefix(8))
        let before = try b.snapshot()
        try b.expectRefused(
            ["resolve", id, "--field", "title", "--keep", prefix],
            mentions: ["--keep \(prefix) is ambiguous: it matches the replicas \([aID, bID].sorted().joined(separator: ", ")) in conflict; give more of the id"], code: 1)
        #expect(try b.snapshot() == before)
        try b.ok("resolve", id, "--field", "title", "--keep", bID)
        #expect(try b.show(id).string("title") == "Buy soy milk")
    }
}

private struct TwoReplicas {
    let sandbox: Sandbox
    let a: Store
    let b: Store
    let folder: String
    let id: String
    let aID: String
    let bID: String

    init() throws {
        sandbox = try Sandbox()
        a = try sandbox.makeStore("a.db")
        b = try sandbox.makeStore("b.db")
        folder = try sandbox.makeDirectory("shared")
        id = try a.addReminder("Buy milk")
        aID = try a.replicaID()
        bID = try b.replicaID()
        try syncAll()
    }

    /// a, b, then a sync through the folder: both then hold every operation either wrote.
    func syncAll(sourceLocation: SourceLocation = #_sourceLocation) throws {
        try a.ok("sync", "--folder", folder, sourceLocation: sourceLocation)
        try b.ok("sync", "--folder", folder, sourceLocation: sourceLocation)
        try a.ok("sync", "--folder", folder, sourceLocation: sourceLocation)
    }
}

/// One object of `conflicts --json`.
private struct ListedConflict {
    struct Head {
        /// The value in canonical JSON.
        var value: String
        var replica: String
        var seq: Int
        var time: String
        var timestamp: UInt64
    }

    var kind: String
    var id: String
    var field: String
    var heads: [Head]
}

/// `conflicts --json`, checked to be canonical JSON with exactly the keys of SPEC.md §10.
private func parseConflicts(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [ListedConflict] {
    let json = try OrderedJSON.parse(text)
    #expect(json.canonical == text, "not canonical: \(text)", sourceLocation: sourceLocation)
    guard case .array(let items) = json else {
        Issue.record("not an array: \(text)", sourceLocation: sourceLocation)
        return []
    }
    return try items.map { item in
        #expect(Set(item.keys) == ["kind", "id", "field", "heads"], "\(item.canonical)", sourceLocation: sourceLocation)
        let heads: [ListedConflict.Head] = try (item["heads"]?.items ?? []).map { head -> ListedConflict.Head in
            #expect(Set(head.keys) == ["value", "replica", "seq", "time", "timestamp"], "\(head.canonical)", sourceLocation: sourceLocation)
            return ListedConflict.Head(
                value: try #require(head["value"]?.canonical, sourceLocation: sourceLocation),
                replica: try #require(head["replica"]?.stringValue, sourceLocation: sourceLocation),
                seq: try #require(head["seq"].flatMap(integer).map(Int.init), sourceLocation: sourceLocation),
                time: try #require(head["time"]?.stringValue, sourceLocation: sourceLocation),
                timestamp: try #require(head["timestamp"].flatMap(integer), "\(head.canonical)", sourceLocation: sourceLocation))
        }
        return ListedConflict(
            kind: try #require(item["kind"]?.stringValue, sourceLocation: sourceLocation),
            id: try #require(item["id"]?.stringValue, sourceLocation: sourceLocation),
            field: try #require(item["field"]?.stringValue, sourceLocation: sourceLocation),
            heads: heads)
    }
}

/// A JSON integer, or one written as a decimal string (a raw HLC value).
private func integer(_ json: OrderedJSON) -> UInt64? {
    switch json {
    case .number(let text), .string(let text): UInt64(text)
    default: nil
    }
}

/// The text `conflicts` prints for `conflicts` on replica `this` (SPEC.md §11).
private func conflictText(_ conflicts: [ListedConflict], this: String) -> String {
    conflicts.flatMap { conflict in
        ["\(conflict.kind) \(conflict.id) \(conflict.field):"] + conflict.heads.enumerated().map { index, head in
            "  \(index == 0 ? "shown" : "other")  \(head.value)  by \(head.replica)\(head.replica == this ? " (this replica)" : "") at \(head.time)"
        }
    }.joined(separator: "\n")
}

/// `history --json`, checked to be canonical JSON: its objects.
private func parseHistory(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [OrderedJSON] {
    let json = try OrderedJSON.parse(text)
    #expect(json.canonical == text, "not canonical: \(text)", sourceLocation: sourceLocation)
    guard case .array(let items) = json else {
        Issue.record("not an array: \(text)", sourceLocation: sourceLocation)
        return []
    }
    return items
}

/// The title lines of `history` text, from `title = ` on.
private func titleLines(_ history: String) -> [String] {
    history.split(separator: "\n").compactMap { line in line.range(of: "  title = ").map { String(line[$0.lowerBound...].dropFirst(2)) } }
}

/// Checks `history ID` against SPEC.md §10 "History": the text is `log`'s line for each of the
/// record's operations, oldest stamp first, then two spaces and the standing; the JSON is the
/// operation objects of `log --json` in the same order, each with its `standing`, the same as the
/// text's. (The store holds this one record's operations and few others.)
private func checkHistory(text: String, json: String, store: Store, id: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let entries = try parseHistory(json, sourceLocation: sourceLocation)
    let lines = text.split(separator: "\n").map(String.init)
    #expect(lines.count == entries.count, "\(text)\n\(json)", sourceLocation: sourceLocation)
    let standings = ["holds", "conflict", "superseded"]
    for (line, entry) in zip(lines, entries) {
        let standing = entry["standing"]?.stringValue ?? "?"
        #expect(standings.contains(standing) && line.hasSuffix("  " + standing), "\(line) / \(entry.canonical)", sourceLocation: sourceLocation)
        #expect(entry["record"]?.stringValue == id, "\(entry.canonical)", sourceLocation: sourceLocation)
    }
    let stamps = entries.compactMap { $0["timestamp"].flatMap(integer) }
    #expect(stamps.count == entries.count && stamps == stamps.sorted() && Set(stamps).count == stamps.count, "oldest stamp first: \(json)", sourceLocation: sourceLocation)

    // The same operations as `log` prints them, newest first there.
    let log = try OrderedJSON.parse(try store.ok("log", "--limit", "1000", "--json", sourceLocation: sourceLocation)).items
        .filter { $0["record"]?.stringValue == id }
    let withoutStanding = entries.map { entry -> String in
        guard case .object(let members) = entry else { return entry.canonical }
        return OrderedJSON.object(members.filter { $0.0 != "standing" }).canonical
    }
    #expect(withoutStanding == log.reversed().map(\.canonical), "history --json is log --json's objects plus standing", sourceLocation: sourceLocation)
    let logLines = try store.ok("log", "--limit", "1000", sourceLocation: sourceLocation).split(separator: "\n")
        .filter { $0.contains("…" + id.suffix(8)) }.map(String.init)
    let stripped = lines.map { line in standings.reduce(line) { $0.hasSuffix("  " + $1) ? String($0.dropLast($1.count + 2)) : $0 } }
    #expect(stripped == logLines.reversed(), "history lines are log lines plus the standing", sourceLocation: sourceLocation)
}

/// A 32-digit id that is not `id`.
private func unusedID(avoiding id: String) -> String {
    let digits = id.first == "f" ? "e" : "f"
    return String(repeating: digits, count: 32)
}
