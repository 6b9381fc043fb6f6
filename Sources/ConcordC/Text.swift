import ConcordCore
import Foundation

/// The text `pointer` points to, refused when it is NULL (`misuse`) or not UTF-8 (`invalidInput`);
/// `what` names it in the message.
func text(_ pointer: UnsafePointer<CChar>?, _ what: String) throws -> String {
    guard let pointer else { throw InterfaceError.misuse("\(what) is NULL") }
    guard let text = String(validatingCString: pointer) else { throw ConcordError(.invalidInput, "\(what) is not valid UTF-8") }
    return text
}

/// The text, or nil for NULL.
func optionalText(_ pointer: UnsafePointer<CChar>?, _ what: String) throws -> String? {
    try pointer.map { try text($0, what) }
}

/// The pointer to return a result through, checked before the call does anything: a call that
/// could not return what it did must not do it.
func output<Pointee>(_ pointer: UnsafeMutablePointer<Pointee>?) throws -> UnsafeMutablePointer<Pointee> {
    guard let pointer else { throw InterfaceError.misuse("the pointer to return the result through is NULL") }
    return pointer
}

/// Hands `text` to the caller through `out`, as a copy that `concord_free` frees.
func give(_ text: String, to out: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) {
    out.pointee = strdup(text)
}

/// Frees text the interface returned; NULL is ignored.
@_cdecl("concord_free")
public func concord_free(_ text: UnsafeMutablePointer<CChar>?) {
    free(text)
}
