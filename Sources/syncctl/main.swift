import ArgumentParser
import ConcordStore
import Foundation

// A write past the file size limit (`ulimit -f`) fails with EFBIG and is reported like any other
// failed write, instead of the signal killing the process halfway.
signal(SIGXFSZ, SIG_IGN)

// `--store PATH` is accepted before the subcommand too: move it after, where every command reads it.
var arguments = Array(CommandLine.arguments.dropFirst())
StoreOptions.hoistLeadingStoreOption(&arguments)

do {
    var command = try Syncctl.parseAsRoot(arguments)
    try command.run()
} catch {
    let code = Syncctl.exitCode(for: error)
    if code == .success {
        // --help, --version and the like.
        print(Syncctl.fullMessage(for: error))
        exit(0)
    }
    let message = Syncctl.message(for: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
    FileHandle.standardError.write(Data("syncctl: \(message)\n".utf8))
    exit(code.rawValue)
}
