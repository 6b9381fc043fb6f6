import ArgumentParser
import ConcordCore
import Foundation

// A write past the file size limit (`ulimit -f`) fails with EFBIG and is reported like any other
// failed write, instead of the signal killing the process halfway.
signal(SIGXFSZ, SIG_IGN)

// Text is UTF-8 (SPEC.md §2): an argument that is not (a Latin-1 terminal's "café", a path in
// another encoding) is refused rather than read with U+FFFD in place of its bytes, which would
// store other text than the user typed, or name another file.
for index in 1..<Int(CommandLine.argc) {
    guard let argument = CommandLine.unsafeArgv[index] else { continue }
    let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(argument).assumingMemoryBound(to: UInt8.self), count: strlen(argument))
    if String(validating: bytes, as: UTF8.self) == nil {
        FileHandle.standardError.write(Data("syncctl: argument \(index) is not valid UTF-8 (text and paths must be UTF-8: is the terminal's encoding UTF-8?)\n".utf8))
        exit(64)
    }
}

// `--store PATH` is accepted before the subcommand too: move it after, where every command reads it.
var arguments = Array(CommandLine.arguments.dropFirst())
StoreOptions.hoistLeadingStoreOption(&arguments)

do {
    // Every command is async; the one-shot ones run their blocking work off the tasks' threads
    // (OneShotCommand). A group of commands given no subcommand (`syncctl reminder`) has only the
    // synchronous `run()`, which prints its help.
    var command = try await Syncctl.asyncParseAsRoot(arguments)
    if var command = command as? any AsyncParsableCommand {
        try await command.runAsynchronously()
    } else {
        try command.run()
    }
} catch {
    let code = Syncctl.exitCode(for: error)
    if code == .success {
        // --help, --version and the like.
        print(Syncctl.fullMessage(for: error))
        exit(0)
    }
    // A library error with syncctl's advice (SPEC.md §12), or the argument parser's line.
    warn(Advice.line(for: error))
    exit(code.rawValue)
}

extension AsyncParsableCommand {
    /// The command's async `run()`. (Called on the existential at the top level, `run()` names the
    /// synchronous requirement of `ParsableCommand`, which prints the help.)
    mutating func runAsynchronously() async throws {
        try await run()
    }
}
