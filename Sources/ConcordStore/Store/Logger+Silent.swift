import Logging

extension Logger {
    /// A logger that drops everything: the default of the calls that log only where an app gives
    /// them a logger (`FolderSync.watch`, `PeerServer`).
    public static let silent = Logger(label: "concord", factory: { _ in SwiftLogNoOpLogHandler() })
}
