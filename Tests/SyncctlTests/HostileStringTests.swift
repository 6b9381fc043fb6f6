import ConcordCore
import Foundation
import Testing

/// Strings at the edges through the built binary (issue 6, "Hostile bytes"): emoji, combining
/// marks in NFC and NFD, right-to-left text, large notes, NUL bytes, invalid UTF-8 in bundles and
/// on the command line. Each is stored and printed byte-exact (show --json, dump) and travels
/// byte-exact through export, merge and folder sync, or is refused with one clear line that
/// changes nothing. Text is compared by its UTF-8 bytes: Swift's `==` equates NFC and NFD.
@Suite(.waitsForProcesses) struct HostileStringTests {
    static let nfc = "caf\u{E9}"
    static let nfd = "cafe\u{301}"
    /// Texts that can be typed as arguments.
    static let texts = [
        "👩‍👩‍👧‍👦 family", "🏳️‍🌈", nfc, nfd, "\u{212B}ngstr\u{F6}m", "A\u{30A}", "שלום עולם", "مرحبا بالعالم",
        "abc \u{202E}fed\u{202C} ghi", "\u{200F}rtl mark", "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇", "\u{FEFF}bom \u{10FFFF} \u{FFFD}", "日本語テキスト",
        "\"quoted\" \\ back\\slash / slash", "tab\there, newline\nthere, CR\r", "\u{7F} del and \u{85} next line",
    ]

    static func utf8(_ text: String?) -> [UInt8]? { text.map { Array($0.utf8) } }

    /// The JSON members of a `show --json` line, with text kept byte-exact.
    static func members(_ json: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: OrderedJSON] {
        guard case .object(let members) = try OrderedJSON.parse(json) else {
            Issue.record("not a JSON object: \(json.prefix(200))", sourceLocation: sourceLocation)
            return [:]
        }
        return Dictionary(members, uniquingKeysWith: { first, _ in first })
    }

    static func text(_ value: OrderedJSON?) -> [UInt8]? {
        if case .string(let text)? = value { return utf8(text) }
        return nil
    }

    static func texts(_ value: OrderedJSON?) -> [[UInt8]]? {
        guard case .array(let items)? = value else { return nil }
        return items.map { text($0) ?? [] }
    }

    /// The JSON text of a string as SPEC.md §10 writes it.
    static func canonical(_ text: String) -> String { JSON.string(text).canonical }

    @Test func edgeTextsTravelByteExactThroughShowDumpExportMergeAndSync() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        var notes: [(id: String, text: String)] = []
        var reminders: [(id: String, text: String)] = []
        let tags = Self.texts.filter { !$0.unicodeScalars.contains { $0.properties.generalCategory == .control } }
        for (index, text) in Self.texts.enumerated() {
            let tagArguments = tags.contains { Self.utf8($0) == Self.utf8(text) } ? ["--tag", text] : []
            let added = try a.run(arguments: ["note", "add", text, "--body", text + "\n" + text] + tagArguments)
            #expect(added.succeeded && isRecordID(added.out), "\(added)")
            notes.append((added.out, text))
            // Reminders for a few of them (each run of syncctl takes a moment).
            if index % 4 == 0 { reminders.append((try a.addReminder(text, "--notes", text), text)) }
        }
        // NFC and NFD spellings are two tags on one note.
        let both = try a.addNote("both", "--tag", Self.nfc, "--tag", Self.nfd)

        // One `list --json` per kind reads them all; `show --json` prints the same objects.
        func check(_ store: Store, sourceLocation: SourceLocation = #_sourceLocation) throws {
            func objects(_ arguments: String...) throws -> [String: [String: OrderedJSON]] {
                guard case .array(let items) = try OrderedJSON.parse(try store.run(arguments: arguments).out) else { return [:] }
                var byID: [String: [String: OrderedJSON]] = [:]
                for case .object(let members) in items {
                    let object = Dictionary(members, uniquingKeysWith: { first, _ in first })
                    if case .string(let id)? = object["id"] { byID[id] = object }
                }
                return byID
            }
            let listedNotes = try objects("note", "list", "--json")
            let listedReminders = try objects("reminder", "list", "--json")
            #expect(listedNotes.count == notes.count + 1 && listedReminders.count == reminders.count, sourceLocation: sourceLocation)
            for (id, text) in notes {
                #expect(Self.text(listedNotes[id]?["title"]) == Self.utf8(text), sourceLocation: sourceLocation)
                #expect(Self.text(listedNotes[id]?["body"]) == Self.utf8(text + "\n" + text), sourceLocation: sourceLocation)
                let expectedTags = tags.contains(where: { Self.utf8($0) == Self.utf8(text) }) ? [Self.utf8(text)!] : []
                #expect(Self.texts(listedNotes[id]?["tags"]) == expectedTags, sourceLocation: sourceLocation)
            }
            for (id, text) in reminders {
                #expect(Self.text(listedReminders[id]?["title"]) == Self.utf8(text), sourceLocation: sourceLocation)
                #expect(Self.text(listedReminders[id]?["notes"]) == Self.utf8(text), sourceLocation: sourceLocation)
            }
            #expect(Self.texts(listedNotes[both]?["tags"]) == [Self.utf8(Self.nfd)!, Self.utf8(Self.nfc)!], "two tags, in UTF-8 byte order", sourceLocation: sourceLocation)
            #expect(try store.ok("verify", sourceLocation: sourceLocation).hasPrefix("sound: "), sourceLocation: sourceLocation)
        }
        try check(a)
        let dump = try a.dump()
        for text in Self.texts {
            #expect(dump.contains(#""title":"# + Self.canonical(text)), "\(String(reflecting: text)) is in the dump as \(Self.canonical(text))")
        }

        // export → merge into B; sync A → folder → C.
        let b = try sandbox.makeStore("b.db")
        try a.ok("export", sandbox.path("a.cbundle"))
        try b.ok("merge", sandbox.path("a.cbundle"))
        try check(b)
        #expect(Self.utf8(try b.dump()) == Self.utf8(dump))
        let folder = try sandbox.makeDirectory("Shared")
        let c = try sandbox.makeStore("c.db")
        try a.ok("sync", "--folder", folder)
        try c.ok("sync", "--folder", folder)
        try check(c)
        #expect(Self.utf8(try c.dump()) == Self.utf8(dump))
    }

    @Test func blankTitlesAndControlCharacterTagsAreRefusedInOneLine() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let note = try store.addNote("keep")
        let before = try store.snapshot()
        for arguments in [["note", "add", ""], ["reminder", "add", " \t\n"], ["note", "add", "\u{3000}"], ["note", "edit", note, "--title", "\u{2029}"]] {
            expectOneLineFailure(try store.run(arguments: arguments), mentions: ["the title is empty"], code: 1)
        }
        // A tag with a line break is refused in one line: the tag is shown escaped.
        expectOneLineFailure(try store.run("note", "tag", note, "--add", "line\nbreak"), mentions: [#"invalid tag "line\u{0a}break""#], code: 1)
        expectOneLineFailure(try store.run("note", "add", "t", "--tag", "tab\there"), mentions: [#"invalid tag "tab\u{09}here""#], code: 1)
        expectOneLineFailure(try store.run("reminder", "add", "t", "--tag", "\u{7F}"), mentions: [#"invalid tag "\u{7f}""#], code: 1)
        #expect(try store.snapshot() == before)
    }

    /// A 100 KB body, typed as an argument (Linux takes at most 128 KiB per argument, so a 1 MB
    /// body cannot be: see the next test), through add, show, dump, export and merge.
    @Test func aLargeBodyFromTheCommandLineRoundTrips() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let piece = "Lisbon 👩‍👩‍👧‍👦 caf\u{E9} cafe\u{301} שלום\n"
        let body = String(repeating: piece, count: 100_000 / piece.utf8.count)
        let id = try a.addNote("big", "--body", body)
        #expect(Self.text(try Self.members(a.ok("show", id, "--json"))["body"]) == Self.utf8(body))
        #expect(try a.dump().contains(Self.canonical(body)))
        let b = try sandbox.makeStore("b.db")
        try a.ok("export", sandbox.path("big.cbundle"))
        try b.ok("merge", sandbox.path("big.cbundle"))
        #expect(Self.text(try Self.members(b.ok("show", id, "--json"))["body"]) == Self.utf8(body))
        #expect(Self.utf8(try b.dump()) == Self.utf8(try a.dump()))
    }

    /// A 1 MiB note body, NUL bytes in a tag and in an unknown field, and an empty title, none of
    /// which an argument can carry, arrive in a bundle written by hand: `merge`, `show --json`,
    /// `dump`, `export`, `merge` into another store and `dump` keep every byte.
    @Test func aOneMegabyteNoteAndNULBytesTravelByteExact() throws {
        let sandbox = try Sandbox()
        let piece = "Lisbon in spring 👩‍👩‍👧‍👦 caf\u{E9} cafe\u{301} שלום مرحبا \u{202E}rtl\u{202C}\t\r\n"
        let body = String(repeating: piece, count: (1 << 20) / piece.utf8.count + 1)
        #expect(body.utf8.count >= 1 << 20)
        let author = ReplicaID(high: 0xFEED, low: 1)
        let big = RecordRef.note(RecordID(high: 0xB16, low: 1))
        let empty = RecordRef.note(RecordID(high: 0xE, low: 2))
        let bundle = HandBundle.bytes(author: author, [
            (big, .assign(.title, .string("big"))),
            (big, .assign(.body, .string(body))),
            (big, .addTag("nul\u{0}tag")),
            (big, .assign(.other("nul\u{0}field"), .string("\u{0}value\u{0}"))),
            (empty, .assign(.title, .string(""))),
        ])
        let path = try sandbox.write(Data(bundle), to: "hand.cbundle")
        let a = try sandbox.makeStore("a.db")
        #expect(try a.ok("merge", path) == "merged 5 new operations from 1 replica")
        let shown = try Self.members(a.ok("show", big.id.hex, "--json"))
        #expect(Self.text(shown["body"]) == Self.utf8(body))
        #expect(Self.texts(shown["tags"]) == [Self.utf8("nul\u{0}tag")!])
        #expect(Self.text(try Self.members(a.ok("show", empty.id.hex, "--json"))["title"]) == [])
        let dump = try a.dump()
        #expect(dump.contains(#""unknown":{"nul\u0000field":"\u0000value\u0000"}"#))
        #expect(dump.contains(#""tags":["nul\u0000tag"]"#))
        #expect(dump.contains(Self.canonical(body)))
        #expect(try a.ok("verify").hasPrefix("sound: "))

        let b = try sandbox.makeStore("b.db")
        try a.ok("export", sandbox.path("again.cbundle"))
        try b.ok("merge", sandbox.path("again.cbundle"))
        #expect(Self.utf8(try b.dump()) == Self.utf8(dump))
        #expect(Self.text(try Self.members(b.ok("show", big.id.hex, "--json"))["body"]) == Self.utf8(body))
    }

    /// A bundle whose title is not UTF-8 (checksums right): `merge` refuses it in one line and
    /// changes nothing; `sync` skips it with one warning line and imports nothing from it.
    @Test func invalidUTF8InABundleIsRefusedByMergeAndSkippedBySync() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        try store.addNote("mine")
        let author = ReplicaID(high: 0xBAD, low: 0xBAD)
        let before = try store.snapshot()
        for text: [UInt8] in [[0x63, 0x61, 0x66, 0xE9], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xFF]] {
            let bytes = HandBundle.bytes(author: author, invalidTitle: text)
            let path = try sandbox.write(Data(bytes), to: "invalid.cbundle")
            expectOneLineFailure(
                try store.run("merge", path), mentions: ["\(path): the bundle is corrupt: block 1: malformed data: string is not valid UTF-8"], code: 1)
        }
        #expect(try store.snapshot() == before)

        let folder = try sandbox.makeDirectory("Shared")
        try sandbox.makeDirectory("Shared/concord-v1")
        let name = "\(author.hex)-0000000001.cbundle"
        try sandbox.write(Data(HandBundle.bytes(author: author, invalidTitle: [0xC3, 0x28])), to: "Shared/concord-v1/\(name)")
        let dump = try store.dump()
        let result = try store.run("sync", "--folder", folder)
        #expect(result.succeeded, "\(result)")
        #expect(result.stderrLines == ["syncctl: warning: skipping \(name): the bundle is corrupt: block 1: malformed data: string is not valid UTF-8"], "\(result)")
        #expect(try store.dump() == dump)
        #expect(try store.status().object("versionVector")?.int(author.hex) == nil)
    }

    /// Anyone who can write to the shared folder names its files. A name with a line break and a
    /// terminal escape used to be printed raw, so the warning broke into two lines, the second
    /// passing for syncctl's own output; it is shown escaped, in one line.
    @Test func hostileFileNamesInTheSharedFolderAreShownEscapedInOneLine() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let folder = try sandbox.makeDirectory("Shared")
        try sandbox.makeDirectory("Shared/concord-v1")
        try sandbox.write(Data(), to: "Shared/concord-v1/evil\nsyncctl: imported 99 operations from 1 file\u{1B}[31m")
        let result = try store.run("sync", "--folder", folder)
        #expect(result.succeeded, "\(result)")
        #expect(result.stderrLines == [
            #"syncctl: warning: skipping evil\u{0a}syncctl: imported 99 operations from 1 file\u{1b}[31m: not a bundle of this folder (a sync tool's temporary file or conflict copy?)"#,
        ], "\(result)")
        #expect(result.stdout == "up to date\n")
    }

    /// Arguments that are not UTF-8 (a Latin-1 "café", a broken sequence, a path) cannot come
    /// from Swift's process API; `/bin/sh` and `printf` pass the raw bytes. syncctl used to
    /// replace them with U+FFFD silently (storing "caf\u{FFFD}", or creating a store under
    /// another name); it refuses them in one line instead, and changes nothing.
    @Test func argumentsThatAreNotUTF8AreRefused() throws {
        let sandbox = try Sandbox()
        let store = try sandbox.makeStore()
        let note = try store.addNote("keep")
        let syncctl = try SyncctlBinary.require().path
        func run(_ script: String) throws -> RunResult {
            try runProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", script, syncctl, store.path, note], environment: sandbox.environment(), scratch: sandbox.root)
        }
        let before = try store.snapshot()
        // $0 is syncctl, $1 the store, $2 the note.
        for (script, position) in [
            (#""$0" note add "$(printf 'caf\351')" --store "$1""#, 3),
            (#""$0" note edit "$2" --body "$(printf 'a\377b')" --store "$1""#, 5),
            (#""$0" note tag "$2" --add "$(printf '\303\050')" --store "$1""#, 5),
            (#""$0" reminder add ok --notes "$(printf '\355\240\200')" --store "$1""#, 5),
            (#""$0" init --store "$(dirname "$1")/$(printf 'b\377d').db""#, 3),
        ] {
            let result = try run(script)
            expectOneLineFailure(result, mentions: ["argument \(position) is not valid UTF-8"], code: 64)
        }
        #expect(try store.snapshot() == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: sandbox.root.path).filter { $0.hasPrefix("b") }.isEmpty, "no store under a repaired name")
        // The same commands in UTF-8 work.
        let ok = try run(#""$0" note add "$(printf 'caf\303\251')" --store "$1""#)
        #expect(ok.succeeded, "\(ok)")
        #expect(Self.text(try Self.members(store.ok("show", ok.out, "--json"))["title"]) == Self.utf8(Self.nfc))
    }
}

/// Bundles written by hand from SPEC.md §13, with a zstd frame of raw (stored) blocks, so that
/// they can hold what `syncctl` cannot write: invalid UTF-8, texts no argument can carry.
enum HandBundle {
    static func be32(_ value: Int) -> [UInt8] { [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: value >> $0) } }

    static func block(_ type: UInt8, raw: [UInt8], compressed: Bool) -> [UInt8] {
        let stored = compressed ? rawFrame(raw) : raw
        return [type, compressed ? 1 : 0] + be32(stored.count) + be32(raw.count) + be32(Int(CRC32C.checksum(stored))) + stored
    }

    /// One zstd frame holding `content` in raw blocks of at most 128 KiB.
    static func rawFrame(_ content: [UInt8]) -> [UInt8] {
        var frame: [UInt8] = [0x28, 0xB5, 0x2F, 0xFD, 0xA0] + (0..<4).map { UInt8(truncatingIfNeeded: content.count >> (8 * $0)) }
        var offset = 0
        repeat {
            let size = min(content.count - offset, 128 << 10)
            let header = size << 3 | (offset + size == content.count ? 1 : 0)
            frame += [UInt8(header & 0xFF), UInt8(header >> 8 & 0xFF), UInt8(header >> 16 & 0xFF)]
            frame += content[offset..<offset + size]
            offset += size
        } while offset < content.count
        return frame
    }

    /// A bundle of one run: `author`'s operations 1…n, one block.
    static func bytes(author: ReplicaID, run: [UInt8], count: Int) -> [UInt8] {
        var manifest = ByteWriter()
        manifest.identifier(author)
        manifest.varint(0)
        manifest.varint(0)
        manifest.varint(1)
        manifest.identifier(author)
        manifest.varint(UInt64(count))
        var payload = ByteWriter()
        payload.varint(1)
        payload.identifier(author)
        payload.varint(1)
        payload.varint(0)
        payload.varint(1)
        payload.varint(UInt64(count))
        payload.varint(UInt64(run.count))
        payload.bytes(run)
        var bytes: [UInt8] = [0x89, 0x43, 0x4E, 0x43, 0x44, 0x0D, 0x0A, 0x1A, 1, 0]
        bytes += block(1, raw: manifest.bytes, compressed: false)
        bytes += block(2, raw: payload.bytes, compressed: true)
        var end = ByteWriter()
        end.varint(UInt64(count))
        end.varint(1)
        end.bytes(be32(Int(CRC32C.checksum(bytes))))
        return bytes + block(3, raw: end.bytes, compressed: false)
    }

    static func bytes(author: ReplicaID, _ items: [(RecordRef, Action)]) -> [UInt8] {
        let operations = items.enumerated().map { index, item in
            Op(id: OperationID(replica: author, seq: UInt64(index + 1)), timestamp: Timestamp(physicalMillis: 1_795_000_000_000 + UInt64(index), logical: 0),
               record: item.0, action: item.1)
        }
        var run = ByteWriter()
        OperationCodec.encode(operations, into: &run)
        return bytes(author: author, run: run.bytes, count: operations.count)
    }

    /// A bundle of one operation assigning a note's title the raw bytes `title`.
    static func bytes(author: ReplicaID, invalidTitle title: [UInt8]) -> [UInt8] {
        var run = ByteWriter()
        run.byte(0)  // assign, a new record
        run.signedVarint(Int64(1_795_000_000_000 << 16))
        run.byte(2)  // a note
        run.identifier(RecordID(high: 0xBAD, low: 1))
        run.byte(Field.title.code)
        run.byte(4)  // a string
        run.varint(UInt64(title.count))
        run.bytes(title)
        return bytes(author: author, run: run.bytes, count: 1)
    }
}
