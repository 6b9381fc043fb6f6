/// `text` with every Unicode control character (general category Cc: C0, DEL and C1) written as
/// `\u{XX}`, in lower-case hex of at least two digits (SPEC.md §12). Every message and warning
/// that quotes what someone else wrote (a tag, a file name in a shared folder, a peer's reason)
/// goes through this one function: a raw line feed or U+0085 would break its one line, and a raw
/// ESC or U+009B start a terminal's control sequence.
package func escapingControlCharacters(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else { return text }
    var out = ""
    for scalar in text.unicodeScalars {
        if scalar.properties.generalCategory == .control {
            let digits = String(scalar.value, radix: 16, uppercase: false)
            out += "\\u{" + (digits.count < 2 ? "0" : "") + digits + "}"
        } else {
            out.unicodeScalars.append(scalar)
        }
    }
    return out
}
