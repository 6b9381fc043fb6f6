import Logging

extension Logger {
    /// A logger that drops everything: the default of the library's long-running parts
    /// (`FolderSync.watch`, `PeerServer`), which log only where an app gives them a logger.
    public static let silent = Logger(label: "concord", factory: { _ in SwiftLogNoOpLogHandler() })
}
