/// How a reminder repeats. Stored in the `repeat` field as its raw value.
public enum RepeatRule: Hashable, Sendable, CustomStringConvertible {
    /// Every hour.
    case hourly
    /// Every day.
    case daily
    /// Every week.
    case weekly
    /// Monthly on a day of the month (1...31), clamped to the month's last day.
    case monthly(day: Int)

    /// Parses the stored form: `hourly`, `daily`, `weekly` or `monthly:D` with D in 1...31.
    public init?(rawValue: String) {
        switch rawValue {
        case "hourly": self = .hourly
        case "daily": self = .daily
        case "weekly": self = .weekly
        default:
            guard rawValue.hasPrefix("monthly:"), let day = Int(rawValue.dropFirst(8)), (1...31).contains(day),
                  rawValue.utf8.count <= 10
            else { return nil }
            self = .monthly(day: day)
        }
    }

    /// The stored form: `hourly`, `daily`, `weekly` or `monthly:D`.
    public var rawValue: String {
        switch self {
        case .hourly: "hourly"
        case .daily: "daily"
        case .weekly: "weekly"
        case .monthly(let day): "monthly:\(day)"
        }
    }

    /// The stored form.
    public var description: String { rawValue }

    /// The user-facing name (`monthly` without its day).
    public var name: String {
        if case .monthly = self { return "monthly" }
        return rawValue
    }

    /// A rule by its user-facing name; a monthly rule takes its day from `due` (UTC).
    public init?(name: String, due: Int64?) {
        switch name {
        case "hourly": self = .hourly
        case "daily": self = .daily
        case "weekly": self = .weekly
        case "monthly": self = .monthly(day: due.map { CivilTime(millis: $0).day } ?? 1)
        default: return nil
        }
    }

    /// The occurrence after `due` (milliseconds since the epoch, UTC calendar). A pure function
    /// of `due`, so two replicas completing the same occurrence write the same next due date.
    public func next(after due: Int64) -> Int64 {
        let hour: Int64 = 3_600_000
        switch self {
        case .hourly: return due + hour
        case .daily: return due + 24 * hour
        case .weekly: return due + 7 * 24 * hour
        case .monthly(let day):
            var civil = CivilTime(millis: due)
            civil.month += 1
            if civil.month > 12 {
                civil.month = 1
                civil.year += 1
            }
            civil.day = min(day, CivilTime.daysIn(month: civil.month, year: civil.year))
            return civil.millis
        }
    }
}

/// A UTC calendar date and time, converted to and from milliseconds since the epoch with
/// Howard Hinnant's days-from-civil algorithm (proleptic Gregorian calendar). No Foundation, no
/// time zone database: the same on every platform.
package struct CivilTime: Hashable, Sendable {
    /// The year, proleptic Gregorian.
    package var year: Int
    /// The month, 1 to 12.
    package var month: Int
    /// The day of the month, from 1.
    package var day: Int
    /// Milliseconds since midnight.
    package var millisOfDay: Int64

    /// This date and time of day, taken as they are (nothing is checked).
    package init(year: Int, month: Int, day: Int, millisOfDay: Int64 = 0) {
        self.year = year
        self.month = month
        self.day = day
        self.millisOfDay = millisOfDay
    }

    /// The UTC date and time of an instant in milliseconds since the epoch.
    package init(millis: Int64) {
        let dayMillis: Int64 = 86_400_000
        var days = millis / dayMillis
        var rest = millis % dayMillis
        if rest < 0 {
            rest += dayMillis
            days -= 1
        }
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        self.init(year: Int(y), month: Int(m), day: Int(d), millisOfDay: rest)
    }

    /// Days from 1970-01-01 to the date; negative before it.
    package var daysSinceEpoch: Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let m = Int64(month)
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The instant in milliseconds since the epoch.
    package var millis: Int64 { daysSinceEpoch * 86_400_000 + millisOfDay }

    /// Whether `year` is a leap year of the Gregorian calendar.
    package static func isLeap(_ year: Int) -> Bool {
        year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
    }

    /// How many days `month` (1 to 12) of `year` has.
    package static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// `YYYY-MM-DDTHH:MM:SS.sssZ`, the form every Concord output uses for instants.
    package var iso8601: String {
        func pad(_ value: Int, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        let ms = Int(millisOfDay)
        let yearText = year >= 0 ? pad(year, 4) : "-" + pad(-year, 4)
        return "\(yearText)-\(pad(month, 2))-\(pad(day, 2))T\(pad(ms / 3_600_000, 2)):\(pad(ms / 60_000 % 60, 2)):"
            + "\(pad(ms / 1000 % 60, 2)).\(pad(ms % 1000, 3))Z"
    }
}
