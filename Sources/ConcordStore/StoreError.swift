import ConcordCore
import GRDB

/// An error of input from outside (a damaged bundle, a hostile peer) that a merge refused.
public protocol InvalidInputError: Error, CustomStringConvertible {}

/// The operation of a clash (`StoreError.Code.clash`): the store holds a different operation
/// under the same id. It is the `underlying` error of the store error that reports the clash.
public struct OperationClash: Error, Hashable, Sendable {
    public var id: OperationID
}

/// An error a store reports: a code to branch on and a message that says what went wrong and,
/// where there is one, what to do about it.
public struct StoreError: Error, Hashable, CustomStringConvertible {
    public struct Code: Hashable, Sendable {
        fileprivate enum Wrapped: Hashable { case missing, exists, notAStore, newerSchema, corrupt, readOnly, invalidChange, invalidInput, notFound, ambiguous, io, copied, forked, clash, keyReplaced }
        fileprivate let wrapped: Wrapped

        /// No store at the path.
        public static let missing = Code(wrapped: .missing)
        /// `create` found a file already at the path.
        public static let exists = Code(wrapped: .exists)
        /// The file is not a Concord store (not SQLite, or another application's database).
        public static let notAStore = Code(wrapped: .notAStore)
        /// The store was written by a newer version of Concord.
        public static let newerSchema = Code(wrapped: .newerSchema)
        /// SQLite reports the file as damaged.
        public static let corrupt = Code(wrapped: .corrupt)
        /// The store cannot be written (read-only file or file system).
        public static let readOnly = Code(wrapped: .readOnly)
        /// A change was refused (unknown record, empty title, …); the store is unchanged.
        public static let invalidChange = Code(wrapped: .invalidChange)
        /// Operations from elsewhere were refused as malformed; the store is unchanged.
        public static let invalidInput = Code(wrapped: .invalidInput)
        /// No record matches an id or prefix.
        public static let notFound = Code(wrapped: .notFound)
        /// Id digits match more than one record.
        public static let ambiguous = Code(wrapped: .ambiguous)
        /// Any other failure of the file system or SQLite.
        public static let io = Code(wrapped: .io)
        /// The store file was copied (or restored, or moved to another file system) since it was
        /// last written: it refuses writes until it is forked or declared moved (SPEC.md §9.1).
        public static let copied = Code(wrapped: .copied)
        /// Another process made the store another replica (`init --fork`) after this object
        /// opened it: it refuses writes and publishing under the old id; open the store again.
        public static let forked = Code(wrapped: .forked)
        /// Two different operations under one (replica, seq): two stores share a replica id.
        public static let clash = Code(wrapped: .clash)
        /// The store's sync key is no longer the one a write was made for (a peer session whose
        /// key was replaced meanwhile, SPEC.md §15.1); nothing was written.
        public static let keyReplaced = Code(wrapped: .keyReplaced)
    }

    public var code: Code
    public var message: String
    public var underlying: (any Error)?

    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    public var description: String { message }

    public static func == (lhs: StoreError, rhs: StoreError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
    }

    /// Maps any error thrown inside a store operation to a `StoreError` naming `path`.
    static func wrap(_ error: any Error, path: String) -> StoreError {
        switch error {
        case let error as StoreError where error.code == .corrupt && !error.message.contains(path):
            return StoreError(.corrupt, "the store at \(path) is corrupt (\(error.message)); restore it from a backup or another replica", underlying: error)
        case let error as StoreError:
            return error
        case let error as ChangeError:
            let code: Code =
                switch error {
                case .notFound: .notFound
                default: .invalidChange
                }
            return StoreError(code, error.description, underlying: error)
        case let error as InvalidOperation:
            return StoreError(.invalidInput, error.description, underlying: error)
        case let error as any InvalidInputError:
            return StoreError(.invalidInput, error.description, underlying: error)
        case let error as TurnTimedOut:
            return StoreError(.io, "the store at \(path) stayed locked by another process; try again", underlying: error)
        case let error as ClockError:
            return StoreError(.invalidChange, error.description, underlying: error)
        case let error as DatabaseError:
            switch error.resultCode {
            case .SQLITE_NOTADB:
                return StoreError(.notAStore, "\(path) is not a Concord store", underlying: error)
            case .SQLITE_CORRUPT:
                return StoreError(.corrupt, "the store at \(path) is corrupt (\(error.message ?? "SQLite reports corruption")); restore it from a backup or another replica", underlying: error)
            case .SQLITE_READONLY where error.extendedResultCode == .SQLITE_READONLY_DIRECTORY:
                return StoreError(.readOnly, "the store at \(path) is read-only: its directory cannot be written", underlying: error)
            case .SQLITE_READONLY:
                return StoreError(.readOnly, "the store at \(path) is read-only", underlying: error)
            case .SQLITE_CANTOPEN where FileAccess.isReadOnly(path):
                return StoreError(.readOnly, "the store at \(path) is read-only", underlying: error)
            case .SQLITE_FULL:
                return StoreError(.io, "the disk is full; nothing was written to \(path)", underlying: error)
            case .SQLITE_IOERR where FileAccess.isDiskFull(near: path):
                // On a full disk SQLite cannot even size the store's shared-memory file, and says
                // only "disk I/O error".
                return StoreError(.io, "the disk is full; nothing was written to \(path)", underlying: error)
            case .SQLITE_BUSY, .SQLITE_LOCKED:
                return StoreError(.io, "the store at \(path) stayed locked by another process; try again", underlying: error)
            default:
                return StoreError(.io, "SQLite error on \(path): \(error.message ?? "\(error.resultCode)")", underlying: error)
            }
        default:
            return StoreError(.io, "\(path): \(error)", underlying: error)
        }
    }
}
