import ArgumentParser
import ConcordCore
import ConcordStore
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `syncctl import FILE [--json]`: reminders and notes from the JSON form `reminder list --json`
/// and `note list --json` print, created as local writes (SPEC.md §10, "Import form"; §11).
struct Import: OneShotCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create the reminders and notes of a JSON file (as 'reminder list --json' prints them).",
        discussion: """
            FILE holds JSON values, each a reminder or note object or an array of them: one array, \
            one object per line, or what jq prints; - reads standard input. A record whose id the \
            store already holds is left as it is, so importing a file again creates nothing new \
            (a record without an id is created anew each time). The file is read once, in one \
            transaction: the first thing wrong is refused with its line (and record and field, or \
            column), and nothing is written.
            """)
    @OptionGroup var store: StoreOptions
    @Argument(help: "The file to import; - for standard input.") var file: String
    @OptionGroup var output: JSONFlag

    func work() throws {
        // The file is opened before the store and closed after it: FILE might name one of the
        // store's own files, and a descriptor of it closed while this process holds a connection
        // would drop SQLite's locks on it.
        let input = try ImportFile(file)
        defer { input.close() }
        let store = try store.open()
        defer { try? store.close() }
        let summary = try Self.importRecords(from: input, into: store)
        if output.json {
            say(JSON.object([
                ("alreadyHeld", .int(Int64(summary.held))), ("notes", .int(Int64(summary.notes))),
                ("reminders", .int(Int64(summary.reminders))), ("withoutId", .int(Int64(summary.withoutID))),
            ]).canonical)
        } else {
            var notes: [String] = []
            if summary.held > 0 { notes.append("\(summary.held) already held") }
            if summary.withoutID > 0 { notes.append("\(summary.withoutID) without an id, created anew at every import") }
            say("imported \(summary.reminders) reminder\(summary.reminders == 1 ? "" : "s") and \(summary.notes) note\(summary.notes == 1 ? "" : "s")"
                + (notes.isEmpty ? "" : " (" + notes.joined(separator: "; ") + ")"))
        }
    }

    /// What an import did.
    struct Summary {
        var reminders = 0
        var notes = 0
        /// Records left as they were: the store held them.
        var held = 0
        /// Records created under an id made for them, since the file gave none.
        var withoutID = 0
    }

    /// Imports the records of `input` into `store`, in one transaction.
    static func importRecords(from input: ImportFile, into store: ConcordStore) throws -> Summary {
        var reader = ImportReader(JSONReader(read: input.read), name: input.name, now: Int64(clamping: store.environment.wallClock()))
        return try importRecords(&reader, into: store)
    }

    /// Imports every record `reader` reads into `store`, in one transaction: the first record
    /// refused, by the reader or by the store, ends it, and nothing is written.
    static func importRecords(_ reader: inout ImportReader, into store: ConcordStore) throws -> Summary {
        var summary = Summary()
        try store.importRecords { create in
            while let record = try reader.next() {
                let outcome: ImportOutcome
                do {
                    outcome = try create(record.values)
                } catch let error as ConcordError where error.code == .invalidChange {
                    throw ImportError("\(record.place): \(error.cause is IDOfAnotherKind ? "id: " : "")\(error.message)")
                }
                switch outcome {
                case .held: summary.held += 1
                case .created(let ref):
                    if ref.kind == .reminder { summary.reminders += 1 } else { summary.notes += 1 }
                    if record.values.id == nil { summary.withoutID += 1 }
                }
            }
        }
        return summary
    }
}

/// The file an import reads, read as it goes: `-` is standard input.
final class ImportFile {
    /// The file as messages name it.
    let name: String
    private let descriptor: Int32

    init(_ path: String) throws {
        guard path != "-" else {
            name = "standard input"
            descriptor = STDIN_FILENO
            return
        }
        name = path
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ImportError("cannot read \(path) (\(String(cString: strerror(errno))))") }
    }

    /// Reads the next bytes into `buffer`; 0 at the end of the file.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        while true {
            #if canImport(Glibc)
            let count = Glibc.read(descriptor, buffer.baseAddress, buffer.count)
            #else
            let count = Darwin.read(descriptor, buffer.baseAddress, buffer.count)
            #endif
            if count >= 0 { return count }
            guard errno == EINTR else { throw ImportError("cannot read \(name) (\(String(cString: strerror(errno))))") }
        }
    }

    func close() {
        #if canImport(Glibc)
        if descriptor != STDIN_FILENO { _ = Glibc.close(descriptor) }
        #else
        if descriptor != STDIN_FILENO { _ = Darwin.close(descriptor) }
        #endif
    }
}

/// A refused import: its message names the file and the place in it.
struct ImportError: InvalidInputError {
    let description: String
    init(_ description: String) { self.description = description }
}
