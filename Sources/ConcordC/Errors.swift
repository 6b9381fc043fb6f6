import ConcordCore
import Foundation

/// A failure as the C interface reports it (concord.h, "Status codes"): a `ConcordError`'s code
/// numbered by its place in SPEC.md §12.1's table, or `misuse` for a call that breaks the
/// header's rules.
struct InterfaceError: Error {
    var status: Int32
    var name: String
    var message: String

    static let misuseStatus: Int32 = 100

    /// A NULL where a value is required, a closed handle: the caller's mistake, not the store's.
    static func misuse(_ message: String) -> InterfaceError {
        InterfaceError(status: misuseStatus, name: "misuse", message: message)
    }

    init(status: Int32, name: String, message: String) {
        self.status = status
        self.name = name
        self.message = message
    }

    init(_ error: ConcordError) {
        // Codes are added at the end of the table, so a code's number never changes.
        let index = ConcordError.Code.all.firstIndex(of: error.code) ?? ConcordError.Code.all.firstIndex(of: .io)!
        self.init(status: Int32(index + 1), name: error.code.description, message: error.message)
    }

    init(_ error: any Error) {
        switch error {
        case let error as InterfaceError: self = error
        case let error as ConcordError: self.init(error)
        default: self.init(ConcordError(.io, String(describing: error), cause: error))
        }
    }
}

/// What `concord_error *` points to: the error's texts as C strings, alive as long as it is.
final class ErrorBox {
    let status: Int32
    let name: UnsafeMutablePointer<CChar>
    let message: UnsafeMutablePointer<CChar>

    init(_ error: InterfaceError) {
        status = error.status
        name = strdup(error.name)
        message = strdup(escapingControlCharacters(error.message))
    }

    deinit {
        free(name)
        free(message)
    }
}

/// Runs `body`, one call of the C interface: returns `CONCORD_OK`, or the status of what it threw
/// with a new error object in `*error` when `error` is not NULL.
func perform(_ out: UnsafeMutablePointer<OpaquePointer?>?, _ body: () throws -> Void) -> Int32 {
    do {
        try body()
        return 0
    } catch {
        let failure = InterfaceError(error)
        out.map { $0.pointee = OpaquePointer(Unmanaged.passRetained(ErrorBox(failure)).toOpaque()) }
        return failure.status
    }
}

/// The error object `pointer` names, or nil for NULL.
func errorBox(_ pointer: OpaquePointer?) -> ErrorBox? {
    pointer.map { Unmanaged<ErrorBox>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
}

/// The status of `error`.
@_cdecl("concord_error_code")
public func concord_error_code(_ error: OpaquePointer?) -> Int32 {
    errorBox(error)?.status ?? InterfaceError.misuseStatus
}

/// The stable name of `error`'s code.
@_cdecl("concord_error_name")
public func concord_error_name(_ error: OpaquePointer?) -> UnsafePointer<CChar>? {
    errorBox(error).map { UnsafePointer($0.name) }
}

/// The one-line message of `error`.
@_cdecl("concord_error_message")
public func concord_error_message(_ error: OpaquePointer?) -> UnsafePointer<CChar>? {
    errorBox(error).map { UnsafePointer($0.message) }
}

/// Frees `error`; NULL is ignored.
@_cdecl("concord_error_free")
public func concord_error_free(_ error: OpaquePointer?) {
    guard let error else { return }
    Unmanaged<ErrorBox>.fromOpaque(UnsafeRawPointer(error)).release()
}

/// The version of the interface this library implements.
@_cdecl("concord_abi_version")
public func concord_abi_version() -> Int32 {
    2
}
