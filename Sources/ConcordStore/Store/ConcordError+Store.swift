import ConcordCore
import GRDB

/// An error of input from outside (a damaged bundle, a hostile peer) that a merge refused.
package protocol InvalidInputError: Error, CustomStringConvertible {}

/// The operation of a clash (`ConcordError.Code.clash`): the store holds a different operation
/// under the same id. It is the `cause` of the error that reports the clash.
package struct OperationClash: Error, Hashable, Sendable {
    package var id: OperationID
}

extension ConcordError {
    /// A create of an id that the store holds under another kind: a record id names one record
    /// whatever its kind (SPEC.md §2). Its `cause` says so, for an import to name the field.
    static func idOfAnotherKind(_ ref: RecordRef, heldAs other: RecordKind) -> ConcordError {
        let refusal = IDOfAnotherKind(ref: ref, heldAs: other)
        return ConcordError(.invalidChange, refusal.description, cause: refusal)
    }

    /// Maps any error thrown inside a store operation to a `ConcordError` naming `path`.
    static func wrap(_ error: any Error, path: String) -> ConcordError {
        switch error {
        case let error as ConcordError where error.code == .corrupt && !error.message.contains(path):
            return ConcordError(.corrupt, "the store at \(path) is corrupt (\(error.message)); restore it from a backup or another replica", cause: error)
        case let error as ConcordError:
            return error
        case let error as ChangeError:
            let code: Code =
                switch error {
                case .notFound: .notFound
                case .retired: .retired
                default: .invalidChange
                }
            return ConcordError(code, error.description, cause: error)
        case let error as InvalidOperation:
            return ConcordError(.invalidInput, error.description, cause: error)
        case let error as any InvalidInputError:
            return ConcordError(.invalidInput, error.description, cause: error)
        case let error as TurnTimedOut:
            return ConcordError(.io, "the store at \(path) stayed locked by another process; try again", cause: error)
        case let error as ClockError:
            return ConcordError(.invalidChange, error.description, cause: error)
        case let error as DatabaseError:
            switch error.resultCode {
            case .SQLITE_NOTADB:
                return ConcordError(.notAStore, "\(path) is not a Concord store", cause: error)
            case .SQLITE_CORRUPT:
                return ConcordError(.corrupt, "the store at \(path) is corrupt (\(error.message ?? "SQLite reports corruption")); restore it from a backup or another replica", cause: error)
            case .SQLITE_READONLY where error.extendedResultCode == .SQLITE_READONLY_DIRECTORY:
                return ConcordError(.readOnly, "the store at \(path) is read-only: its directory cannot be written", cause: error)
            case .SQLITE_READONLY where FileAccess.isSideFileUncreatable(beside: path),
                 .SQLITE_CANTOPEN where FileAccess.isReadOnly(path) && FileAccess.isSideFileUncreatable(beside: path):
                return ConcordError(.readOnly, "the store at \(path) is read-only: its directory cannot be written", cause: error)
            case .SQLITE_READONLY:
                return ConcordError(.readOnly, "the store at \(path) is read-only", cause: error)
            case .SQLITE_CANTOPEN where FileAccess.isReadOnly(path):
                return ConcordError(.readOnly, "the store at \(path) is read-only", cause: error)
            case .SQLITE_FULL:
                return ConcordError(.io, "the disk is full; nothing was written to \(path)", cause: error)
            case .SQLITE_IOERR where FileAccess.isDiskFull(near: path):
                // On a full disk SQLite cannot even size the store's shared-memory file, and says
                // only "disk I/O error".
                return ConcordError(.io, "the disk is full; nothing was written to \(path)", cause: error)
            case .SQLITE_BUSY, .SQLITE_LOCKED:
                return ConcordError(.io, "the store at \(path) stayed locked by another process; try again", cause: error)
            default:
                return ConcordError(.io, "SQLite error on \(path): \(error.message ?? "\(error.resultCode)")", cause: error)
            }
        default:
            return ConcordError(.io, "\(path): \(error)", cause: error)
        }
    }
}
