import ConcordCore
import ConcordExchange
import ConcordStore
import Foundation
import Testing

/// The longest text a local change writes (SPEC.md §7).
@Suite struct TextLimitTests {
    /// A bundle block holds at most 16 MiB (SPEC.md §13), so a text too long for one cannot
    /// travel. A 17 MiB note body used to be accepted locally: every bundle holding it then had
    /// a block over the limit that no reader accepts, so the note, and every operation published
    /// in the same shared-folder file (and, once coalesced, all of its replica's), never reached
    /// another replica. A local change now refuses a text over 8 MiB with a clear error; one of
    /// exactly 8 MiB is stored, exported and read back from the bundle.
    @Test func aTextTooLongForABundleIsRefusedLocally() throws {
        let limit = 8 << 20
        let directory = try TemporaryDirectory()
        let a = try ConcordStore.create(at: directory.file("a.db"), environment: environment(clock: ManualClock(baseMillis), seed: 50))
        let note = try a.addNote(NoteDraft(title: "big"))
        let reminder = try a.addReminder(ReminderDraft(title: "big"))
        let dump = try a.dump()
        // Bytes are counted, not characters: 4 Mi + 1 "é" are 8 MiB + 2 bytes.
        for text in [String(repeating: "a", count: limit + 1), String(repeating: "\u{E9}", count: limit / 2 + 1)] {
            let tooLong = ConcordError(.invalidChange, "the text is too long: \(text.utf8.count) bytes, at most \(limit) (8 MiB)")
            #expect(throws: tooLong) { try a.editNote(note, NotePatch(body: text)) }
            #expect(throws: tooLong) { try a.editNote(note, NotePatch(title: text)) }
            #expect(throws: tooLong) { try a.addNote(NoteDraft(title: "t", body: text)) }
            #expect(throws: tooLong) { try a.addReminder(ReminderDraft(title: text)) }
            #expect(throws: tooLong) { try a.editReminder(reminder, ReminderPatch(notes: .some(text))) }
            #expect(throws: tooLong) { try a.tag(.note(note), add: [text]) }
        }
        #expect(try a.dump() == dump)

        try a.editNote(note, NotePatch(body: String(repeating: "a", count: limit)))
        try a.exportBundle(to: directory.file("big.cbundle"), since: VersionVector([a.replicaID: 8]))
        let (_, operations, _) = try readBundle(try readBytes(directory.file("big.cbundle")))
        guard operations.count == 1, case .assign(.body, .string(let body)) = operations[0].action else {
            Issue.record("the bundle holds \(operations)")
            return
        }
        #expect(body.utf8.count == limit)
    }
}
