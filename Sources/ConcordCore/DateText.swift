import Foundation

// Dates and instants as text: what the command line takes (`reminder add --due`) and what JSON
// gives (SPEC.md §10).

extension CivilTime {
    /// The date `text` names: `2026-11-22T09:30:00Z` (a fraction of a second, `t` or a space for
    /// `T`, and `z` are accepted), with an offset (`+02:00`, `-0530`), without a zone (local time,
    /// the offset in force then), or a plain date (local midnight); nil for anything else.
    package static func date(parsing text: String) -> Date? {
        let bytes = Array(text.utf8)
        var index = 0
        func number(_ digits: Int) -> Int? {
            guard index + digits <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<index + digits] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            index += digits
            return value
        }
        func expect(_ character: Character) -> Bool {
            guard index < bytes.count, bytes[index] == character.asciiValue else { return false }
            index += 1
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2),
              (1...12).contains(month), (1...CivilTime.daysIn(month: month, year: year)).contains(day)
        else { return nil }
        var millisOfDay: Int64 = 0
        var offsetSeconds: Int?
        if index < bytes.count {
            guard expect("T") || expect("t") || expect(" "), let hour = number(2), hour < 24, expect(":"),
                  let minute = number(2), minute < 60
            else { return nil }
            var second = 0
            var millis = 0
            if expect(":") {
                guard let s = number(2), s < 60 else { return nil }
                second = s
                if expect(".") {
                    let start = index
                    while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 { index += 1 }
                    guard index > start else { return nil }
                    let fraction = String(decoding: bytes[start..<min(index, start + 3)], as: UTF8.self)
                    millis = Int(fraction.padding(toLength: 3, withPad: "0", startingAt: 0)) ?? 0
                }
            }
            millisOfDay = Int64(((hour * 60 + minute) * 60 + second) * 1000 + millis)
            if expect("Z") || expect("z") {
                offsetSeconds = 0
            } else if index < bytes.count {
                let sign: Int
                if expect("+") { sign = 1 } else if expect("-") { sign = -1 } else { return nil }
                guard let hours = number(2), hours <= 23 else { return nil }
                _ = expect(":")
                guard let minutes = number(2), minutes < 60 else { return nil }
                offsetSeconds = sign * (hours * 3600 + minutes * 60)
            }
            guard index == bytes.count else { return nil }
        }
        let asUTC = CivilTime(year: year, month: month, day: day, millisOfDay: millisOfDay).millis
        if let offsetSeconds {
            return Date(millisecondsSince1970: asUTC - Int64(offsetSeconds) * 1000)
        }
        // Local time: find the offset in force at that local time.
        let zone = TimeZone.current
        let guess = Date(millisecondsSince1970: asUTC)
        var offset = zone.secondsFromGMT(for: guess)
        let adjusted = zone.secondsFromGMT(for: guess.addingTimeInterval(TimeInterval(-offset)))
        if adjusted != offset { offset = adjusted }
        return Date(millisecondsSince1970: asUTC - Int64(offset) * 1000)
    }

    /// The instant `text` names in JSON (SPEC.md §10: `2026-11-25T09:30:00.000Z`, in UTC, within
    /// the years 1 to 9999) as milliseconds since 1970; nil for anything else.
    package static func instant(parsing text: String) -> Int64? {
        guard text.hasSuffix("Z"), let millis = date(parsing: text)?.millisecondsSince1970, Field.instantRange.contains(millis) else {
            return nil
        }
        return millis
    }
}
