import Logging

extension Logger {
    /// A logger that drops everything: the default of `FolderSync.watch`, which logs only where
    /// an app gives it a logger.
    public static let silent = Logger(label: "concord", factory: { _ in SwiftLogNoOpLogHandler() })
}
