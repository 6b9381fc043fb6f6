import ArgumentParser
import Foundation
import ConcordCore

/// The commands `syncctl` names in its error lines. A library message never names a command
/// (SPEC.md §12): it says what went wrong, and its code says what kind of error it is. For the
/// codes whose remedy is a command, `syncctl` adds its advice here, so that its lines read as
/// SPEC.md §12 lists them.
enum Advice {
    /// Where the advice goes in a message.
    enum Edit {
        /// At the end.
        case append(String)
        /// Right before the last occurrence of `anchor` (after a path or a name, which come first).
        case insert(String, before: String)
        /// In place of the last occurrence of `phrase`.
        case replace(String, with: String)
    }

    /// The advice for each code whose remedy is a command: the first edit that applies to the
    /// message (`append` always does).
    static let edits: [ConcordError.Code: [Edit]] = [
        .missing: [.append("; run 'syncctl init' to create one")],
        .copied: [
            // `wipe --folder` of a copy (SPEC.md §11): removing the copy alone is the remedy.
            .replace("are the original's", with: "are the original's; run 'syncctl wipe --yes' without --folder to remove the copy alone"),
            .append(": run 'syncctl init --fork' to make it a replica of its own, or 'syncctl init --moved' if it was moved and the original is no longer used"),
        ],
        .forked: [.replace("(another process forked it)", with: "(another process ran 'syncctl init --fork' on it)")],
        .clash: [
            // A merge's clash (SPEC.md §9.1), and a shared folder's warning about a file whose
            // clashing operations were left out (§14).
            .insert("; run 'syncctl init --fork' on the copy", before: " (nothing of this batch was merged)"),
            .insert(", see 'syncctl init --fork'", before: "; or the file was forged"),
        ],
        .sameReplica: [.append(": run 'syncctl init --fork' on one")],
        .noSyncKey: [.append("; run 'syncctl key generate', or 'syncctl key import KEY' with the key of another store")],
        .encryptedBundle: [.append("; run 'syncctl key import KEY'")],
        .notAVersionVector: [.append(", as 'syncctl status --json' prints")],
        .retired: [.append("; run 'syncctl init --fork' to go on as a new replica, keeping what this store holds")],
    ]

    /// The line `syncctl` shows for `error`: its message, with the advice of its code, or else of
    /// the first error of its causes that has advice (a failed batch whose cause is a copied
    /// store: the message ends with the cause's).
    static func line(for error: ConcordError) -> String {
        var cause: ConcordError? = error
        while let current = cause {
            if let edits = edits[current.code] {
                return apply(edits, to: error.message)
            }
            cause = current.cause as? ConcordError
        }
        return error.message
    }

    /// The line of an error `syncctl` failed with: a library error with its advice, or the
    /// argument parser's first line.
    static func line(for error: any Error) -> String {
        if let error = error as? ConcordError { return line(for: error) }
        let message = Syncctl.message(for: error)
        return message.split(separator: "\n").first.map(String.init) ?? "\(error)"
    }

    private static func apply(_ edits: [Edit], to message: String) -> String {
        for edit in edits {
            switch edit {
            case .append(let advice):
                return message + advice
            case let .insert(advice, anchor):
                guard let range = message.range(of: anchor, options: .backwards) else { continue }
                return message.replacingCharacters(in: range.lowerBound..<range.lowerBound, with: advice)
            case let .replace(phrase, replacement):
                guard let range = message.range(of: phrase, options: .backwards) else { continue }
                return message.replacingCharacters(in: range, with: replacement)
            }
        }
        return message
    }
}
