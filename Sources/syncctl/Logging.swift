import ArgumentParser
import ConcordCore
import Foundation
import Logging

/// `--log-level` and `--log-format` of the long-running commands, `serve` and `sync --watch`
/// (SPEC.md §11, "Logs").
struct LogOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The least severe events to log: trace, debug, info (the default), notice, warning, error or critical.", valueName: "level"))
    var logLevel: Logger.Level?
    @Option(help: ArgumentHelp("text (the default): lines for a person, events at warning and above on stderr; json: one JSON object a line on stdout, for log collectors.", valueName: "format"))
    var logFormat: LogFormat?

    var isGiven: Bool { logLevel != nil || logFormat != nil }

    /// A logger that writes this command's events as these options say.
    func logger(label: String) -> Logger {
        let format = logFormat ?? .text
        var logger = Logger(label: label) { label in LogLineHandler(label: label, format: format) }
        logger.logLevel = logLevel ?? .info
        return logger
    }
}

enum LogFormat: String, ExpressibleByArgument, CaseIterable {
    case text, json
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// Writes each event as one line, at once (a server's log is read as it happens, through a pipe
/// or a file). In text, an event at `info` or `notice` is its message alone on stdout, as the
/// command's output has always been; below that, the level comes first; from `warning` up it goes
/// to stderr as `syncctl: warning: MESSAGE` (`error` for `error` and `critical`). In JSON, every
/// event is a canonical JSON object on stdout: `time`, `level`, `label`, `message`, and the
/// event's metadata under `metadata`.
struct LogLineHandler: LogHandler {
    let label: String
    let format: LogFormat
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let message = "\(event.message)"
        ProgressLine.shared.clear()
        switch format {
        case .text:
            // A message may quote what a peer sent: one line, whatever it holds (SPEC.md §12).
            let message = escapingControlCharacters(message)
            switch event.level {
            case .trace, .debug: say("\(event.level): \(message)")
            case .info, .notice: say(message)
            case .warning: warn("warning: \(message)")
            case .error, .critical: warn("error: \(message)")
            }
        case .json:
            var fields = metadata
            for (key, value) in metadataProvider?.get() ?? [:] { fields[key] = value }
            for (key, value) in event.metadata ?? [:] { fields[key] = value }
            say(JSON.object([
                ("time", .string(Self.timestamp(Date()))), ("level", .string(event.level.rawValue)),
                ("label", .string(label)), ("message", .string(message)),
                ("metadata", .object(fields.map { ($0.key, Self.json($0.value)) })),
            ]).canonical)
        }
    }

    private static func json(_ value: Logger.Metadata.Value) -> JSON {
        switch value {
        case .string(let text): .string(text)
        case .stringConvertible(let value): .string(value.description)
        case .array(let values): .array(values.map(json))
        case .dictionary(let values): .object(values.map { ($0.key, json($0.value)) })
        }
    }

    /// As every instant `syncctl` prints (SPEC.md §10): RFC 3339 in UTC, to the millisecond.
    private static func timestamp(_ date: Date) -> String {
        CivilTime(millis: date.millisecondsSince1970).iso8601
    }
}
