import ConcordCore
import ConcordExchange
import ConcordStore
import Foundation
import Testing

/// Strings at the edges (issue 6, "Hostile bytes"), through the library: stored and returned
/// byte-exact through the store, its dump, a bundle and a shared folder, or refused with a
/// clear error. Text is compared by its UTF-8 bytes, never by Swift's `==` (which equates NFC
/// and NFD spellings).
@Suite struct StringEdgeTests {
    static func bytes(_ text: String?) -> [UInt8]? { text.map { Array($0.utf8) } }

    /// Texts a user may type: every edge string that is not blank and has no NUL (NUL in a known
    /// text field is a known issue, see `KnownIssues.nulInKnownText`).
    static let texts = EdgeStrings.samples.filter { !$0.allSatisfy(\.isWhitespace) && !$0.utf8.contains(0) }
    /// Valid tags: non-empty, no control characters (SPEC.md §6).
    static let tags = EdgeStrings.samples.filter { !$0.isEmpty && !$0.unicodeScalars.contains { $0.properties.generalCategory == .control } }

    /// A store holding a note and a reminder per edge text (title, body, notes), and the edge tags.
    static func populated(in directory: TemporaryDirectory, _ name: String) throws -> (ConcordStore, [RecordID: String]) {
        let store = try ConcordStore.create(at: directory.file(name), environment: environment(clock: ManualClock(baseMillis), seed: 41))
        var texts: [RecordID: String] = [:]
        for text in Self.texts {
            texts[try store.addNote(NoteDraft(title: text, body: text + "\n" + text, tags: Self.tags))] = text
            texts[try store.addReminder(ReminderDraft(title: text, notes: text, tags: [text].filter(Self.tags.contains)))] = text
        }
        return (store, texts)
    }

    /// Every text and tag reads back with the bytes it was written with.
    static func expectExact(_ store: ConcordStore, _ texts: [RecordID: String], sourceLocation: SourceLocation = #_sourceLocation) throws {
        for (id, text) in texts {
            if let note = try store.note(id) {
                #expect(bytes(note.title) == bytes(text), "note title", sourceLocation: sourceLocation)
                #expect(bytes(note.body) == bytes(text + "\n" + text), "note body", sourceLocation: sourceLocation)
                #expect(note.tags.map(bytes) == tags.map(bytes).sorted { $0!.lexicographicallyPrecedes($1!) }, sourceLocation: sourceLocation)
            } else {
                let reminder = try #require(try store.reminder(id), sourceLocation: sourceLocation)
                #expect(bytes(reminder.title) == bytes(text), "reminder title", sourceLocation: sourceLocation)
                #expect(bytes(reminder.notes) == bytes(text), "reminder notes", sourceLocation: sourceLocation)
            }
        }
        #expect(try store.verify().isSound, sourceLocation: sourceLocation)
    }

    @Test func edgeTextsRoundTripByteExactThroughStoreDumpBundleAndFolder() throws {
        let directory = try TemporaryDirectory()
        let (a, texts) = try Self.populated(in: directory, "a.db")
        try Self.expectExact(a, texts)
        // NFC and NFD spellings stay two texts and two tags; so do the three spellings of Å.
        let notes = try a.notes()
        let nfc = try #require(notes.first { Self.bytes($0.title) == Self.bytes(EdgeStrings.nfc) }?.id)
        let nfd = try #require(notes.first { Self.bytes($0.title) == Self.bytes(EdgeStrings.nfd) }?.id)
        #expect(nfc != nfd)
        let tagged = try #require(try a.note(nfc))
        #expect(tagged.tags.filter { $0 == EdgeStrings.nfc }.count == 2, "Swift's == equates the two spellings; the store keeps both")
        #expect(Set(tagged.tags.map(Self.bytes)).count == Self.tags.count)

        // The dump holds the exact bytes, escaped only as SPEC.md §10 says.
        let dump = try a.dump()
        for text in Self.texts {
            let canonical = JSON.string(text).canonical
            #expect(dump.utf8.count > 0 && dump.contains(canonical), "\(String(reflecting: text)) is not in the dump as \(canonical)")
        }

        // Through a bundle into a fresh store.
        let b = try ConcordStore.create(at: directory.file("b.db"), environment: environment(clock: ManualClock(baseMillis + 5), seed: 42))
        try a.exportBundle(to: directory.file("a.cbundle"))
        try b.mergeBundle(at: directory.file("a.cbundle"))
        try Self.expectExact(b, texts)
        #expect(Array(try b.dump().utf8) == Array(dump.utf8))

        // Through a shared folder into a third.
        let folder = try directory.directory("shared")
        let c = try ConcordStore.create(at: directory.file("c.db"), environment: environment(clock: ManualClock(baseMillis + 9), seed: 43))
        _ = try FolderSync(store: b, folder: folder).sync()
        _ = try FolderSync(store: c, folder: folder).sync()
        try Self.expectExact(c, texts)
        #expect(Array(try c.dump().utf8) == Array(dump.utf8))
    }

    /// A title that is empty or only white space (of any script) is refused locally; a tag that
    /// is empty or holds a control character (NUL included) is refused; nothing is written.
    @Test func blankTitlesAndControlCharacterTagsAreRefusedLocally() throws {
        let store = try ConcordStore.inMemory(environment: environment(clock: ManualClock(baseMillis), seed: 44))
        let id = try store.addNote(NoteDraft(title: "keep"))
        let dump = try store.dump()
        for blank in ["", " ", "\t\n\r", "\u{3000}", "\u{2029}", "\u{85}"] {
            #expect(throws: ConcordError(.invalidChange, "the title is empty")) { try store.addNote(NoteDraft(title: blank)) }
            #expect(throws: ConcordError(.invalidChange, "the title is empty")) { try store.addReminder(ReminderDraft(title: blank)) }
            #expect(throws: ConcordError(.invalidChange, "the title is empty")) { try store.editNote(id, NotePatch(title: blank)) }
        }
        // Escaped as SPEC.md §12 says, whatever the character: `\u{09}`, never `\t`; lower case.
        #expect(escapingControlCharacters("tab\there\r\n\u{1B}[31m\u{85}\u{9B}é") == #"tab\u{09}here\u{0d}\u{0a}\u{1b}[31m\u{85}\u{9b}é"#)
        for tag in ["", "\u{0}", "a\u{0}b", "tab\there", "\u{7F}", "\u{85}", "line\nbreak"] {
            let error = #expect(throws: ConcordError.self) { try store.tag(.note(id), add: [tag]) }
            #expect(error?.code == .invalidChange)
            #expect(error?.message == "invalid tag \"\(escapingControlCharacters(tag))\": tags are non-empty and have no control characters")
            #expect(error?.message.contains("\n") == false, "the message is one line")
        }
        #expect(try store.dump() == dump)
        // Zero-width and bidi characters are not control characters (category Cf): they are kept.
        try store.tag(.note(id), add: ["\u{200B}", "\u{202E}x"])
        #expect(try store.note(id)?.tags.map(Self.bytes) == [Self.bytes("\u{200B}"), Self.bytes("\u{202E}x")])
    }

    /// Merged text may be what a local change refuses: an empty title, a tag with a NUL or a
    /// line break, NUL in an unknown field's name and value. All are kept byte-exact and passed on.
    @Test func mergedTextBeyondLocalRulesIsKeptByteExact() throws {
        let note = FuzzCorpus.note
        let operations = FuzzCorpus.ops(FuzzCorpus.bob, [
            (note, .assign(.title, .string(""))),
            (note, .assign(.body, .string(""))),
            (note, .addTag("a\u{0}b")),
            (note, .addTag("line\nbreak")),
            (note, .assign(.other("x\u{0}y"), .string("\u{0}\u{0}v\u{0}"))),
        ])
        let directory = try TemporaryDirectory()
        try writeBytes(try FuzzCorpus.bundle(operations, publisher: FuzzCorpus.bob), to: directory.file("in.cbundle"))
        let a = try ConcordStore.create(at: directory.file("a.db"), environment: environment(clock: ManualClock(baseMillis), seed: 45))
        try a.mergeBundle(at: directory.file("in.cbundle"))
        let read = try #require(try a.note(note.id))
        #expect(Self.bytes(read.title) == [])
        #expect(read.tags.map(Self.bytes) == [Self.bytes("a\u{0}b"), Self.bytes("line\nbreak")])
        let state = try #require(try a.state(of: note))
        #expect(state.value(.other("x\u{0}y")) == .string("\u{0}\u{0}v\u{0}"))
        #expect(state.register(.other("x\u{0}y")) != nil && state.register(.other("xy")) == nil)
        let dump = try a.dump()
        #expect(dump.contains(#""tags":["a\u0000b","line\u000abreak"]"#), "\(dump)")
        #expect(dump.contains(#""unknown":{"x\u0000y":"\u0000\u0000v\u0000"}"#), "\(dump)")
        #expect(try a.verify().isSound)

        try a.exportBundle(to: directory.file("out.cbundle"))
        let b = try ConcordStore.create(at: directory.file("b.db"), environment: environment(clock: ManualClock(baseMillis), seed: 46))
        try b.mergeBundle(at: directory.file("out.cbundle"))
        #expect(Array(try b.dump().utf8) == Array(dump.utf8))
        #expect(Set(try b.allOperations()) == Set(operations))
    }

    /// A note body of 1 MiB of mixed scripts, emoji and combining marks: stored, read, dumped,
    /// exported and merged into another store byte-exact.
    @Test func aOneMegabyteNoteBodyRoundTripsByteExact() throws {
        let piece = "Lisbon in spring 👩‍👩‍👧‍👦 caf\u{E9} cafe\u{301} שלום مرحبا \u{202E}rtl\u{202C}\t\r\n"
        let body = String(repeating: piece, count: (1 << 20) / piece.utf8.count + 1)
        #expect(body.utf8.count >= 1 << 20)
        let directory = try TemporaryDirectory()
        let a = try ConcordStore.create(at: directory.file("a.db"), environment: environment(clock: ManualClock(baseMillis), seed: 47))
        let id = try a.addNote(NoteDraft(title: "big", body: body))
        #expect(Self.bytes(try a.note(id)?.body) == Self.bytes(body))
        let dump = try a.dump()
        #expect(dump.contains(JSON.string(body).canonical))
        let summary = try a.exportBundle(to: directory.file("big.cbundle"))
        #expect(summary.bytes < 1 << 20, "a repetitive body compresses")
        let b = try ConcordStore.create(at: directory.file("b.db"), environment: environment(clock: ManualClock(baseMillis), seed: 48))
        try b.mergeBundle(at: directory.file("big.cbundle"))
        #expect(Self.bytes(try b.note(id)?.body) == Self.bytes(body))
        #expect(Array(try b.dump().utf8) == Array(dump.utf8))
        #expect(try b.verify().isSound)
    }
}

/// Invalid UTF-8 inside a bundle, written by hand behind correct checksums (SPEC.md §8.1: a
/// string is valid UTF-8; §4.3): refused with one line, nothing applied.
@Suite struct InvalidUTF8BundleTests {
    /// Byte sequences that are not UTF-8: a lone continuation byte, a lead byte without its
    /// continuation, overlong encodings (of "/" and of NUL), a UTF-16 surrogate, a code point past
    /// U+10FFFF, bytes that never occur (F5–FF), and a 5-byte form.
    static let invalid: [[UInt8]] = [
        [0x80], [0xC3, 0x28], [0xE2, 0x82], [0xC0, 0xAF], [0xC0, 0x80], [0xE0, 0x80, 0xAF], [0xED, 0xA0, 0x80],
        [0xF4, 0x90, 0x80, 0x80], [0xFF], [0xF5, 0x80, 0x80, 0x80], [0xF8, 0x88, 0x80, 0x80, 0x80],
        Array("ok".utf8) + [0xFE] + Array("ok".utf8),
    ]

    /// The bytes of one operation (seq 1 of its run) whose string at `slot` is `text` (raw bytes).
    static func operationBytes(slot: Int, text: [UInt8]) -> [UInt8] {
        var writer = ByteWriter()
        let header: UInt8 = [0, 0, 1, 2][slot]
        writer.byte(header)
        writer.signedVarint(Int64(FuzzCorpus.millis << 16))
        writer.byte(2)  // a note
        writer.identifier(FuzzCorpus.note.id)
        func string(_ bytes: [UInt8]) {
            writer.varint(UInt64(bytes.count))
            writer.bytes(bytes)
        }
        switch slot {
        case 0:  // the title's value
            writer.byte(Field.title.code)
            writer.byte(4)
            string(text)
        case 1:  // an unknown field's name
            writer.byte(0)
            string(text)
            writer.byte(0)
        case 2:  // a tag added
            string(text)
        default:  // a tag removed
            string(text)
            writer.varint(0)
        }
        return writer.bytes
    }

    /// A whole bundle of that one operation, lengths and checksums right.
    static func bundle(slot: Int, text: [UInt8]) -> [UInt8] {
        let author = FuzzCorpus.carol
        var manifest = ByteWriter()
        manifest.identifier(author)
        manifest.varint(FuzzCorpus.millis)
        manifest.varint(0)
        manifest.varint(1)
        manifest.identifier(author)
        manifest.varint(1)
        let run = operationBytes(slot: slot, text: text)
        let payload = OperationsPayload(replicas: [author.bytes], runs: [.init(author: 0, firstSeq: 1, count: 1, bytes: run)])
        return BundleImage(blocks: [
            .init(type: 1, flags: 0, raw: manifest.bytes),
            .init(type: 2, flags: 1, raw: payload.serialized()),
            .init(type: 3, flags: 0, raw: []),
        ]).assemble(compression: .rawFrame, end: .rebuild)
    }

    @Test func theHandWrittenBundleReadsWhenItsTextIsValid() throws {
        for slot in 0..<4 {
            let (_, operations, _) = try readBundle(Self.bundle(slot: slot, text: Array("valid é".utf8)))
            #expect(operations.count == 1)
        }
    }

    @Test func invalidUTF8AnywhereInAnOperationIsRefusedAndChangesNothing() throws {
        let directory = try TemporaryDirectory()
        let store = try ConcordStore.create(at: directory.file("store.db"), environment: environment(clock: ManualClock(baseMillis), seed: 49))
        try store.addNote(NoteDraft(title: "mine", tags: ["t"]))
        let dump = try store.dump()
        let vector = try store.versionVector()
        for slot in 0..<4 {
            for text in Self.invalid {
                let label = "slot \(slot), bytes \(text.map { String($0, radix: 16) })"
                let bytes = Self.bundle(slot: slot, text: text)
                for chunk in [Int.max, 1] {
                    guard case .corrupt(let why)? = bundleError(bytes, chunk: chunk) as? BundleError else {
                        Issue.record("\(label): not refused as corrupt")
                        continue
                    }
                    #expect(why == "block 1: malformed data: string is not valid UTF-8", "\(label): \(why)")
                }
                let path = directory.file("invalid.cbundle")
                try writeBytes(bytes, to: path)
                do {
                    try store.mergeBundle(at: path)
                    Issue.record("\(label): merged")
                } catch let error as ConcordError {
                    #expect(error.code == .invalidInput)
                    #expect(error.message == "\(path): the bundle is corrupt: block 1: malformed data: string is not valid UTF-8")
                }
                #expect(try store.dump() == dump && store.versionVector() == vector, "\(label): the store changed")
            }
        }
        #expect(try store.verify().isSound)
    }
}

