import Foundation
import Testing

/// Every `--json` output of the CLI is valid JSON whose numbers are JSON numbers (issue 31): a
/// consumer (`jq`, a dashboard, a CI check) gets a number where it expects one, never `"0.042"`.
/// The commands that take `--json` are found in the help, so a command added later without a run
/// here fails the test.
@Suite(.waitsForProcesses) struct JSONOutputTests {
    /// The command paths (`reminder list`, `bench merge`) whose help lists `--json`.
    func commandsTakingJSON(_ sandbox: Sandbox, under path: [String] = []) throws -> Set<String> {
        let help = try sandbox.run(path + ["--help"])
        #expect(help.succeeded, "\(help)")
        // An option's line starts with it (prose may name another command's --json).
        let takesJSON = help.stdout.split(separator: "\n").contains { $0.firstMatch(of: /^ +--json( |$)/) != nil }
        var found: Set<String> = takesJSON && !path.isEmpty ? [path.joined(separator: " ")] : []
        guard let section = help.stdout.components(separatedBy: "SUBCOMMANDS:").dropFirst().first else { return found }
        for line in section.split(separator: "\n") {
            // A subcommand's line starts with two spaces and its name; wrapped text is indented more.
            guard let match = line.firstMatch(of: /^  ([a-z][a-z-]*)( |$)/) else { continue }
            found.formUnion(try commandsTakingJSON(sandbox, under: path + [String(match.1)]))
        }
        return found
    }

    /// Each string of `value` that reads as a number, with where it is.
    func numbersAsStrings(in value: OrderedJSON, at place: String = "$") -> [String] {
        switch value {
        case .string(let text) where text.wholeMatch(of: /-?[0-9]+(\.[0-9]+)?/) != nil: ["\(place) = \"\(text)\""]
        case .array(let items): items.enumerated().flatMap { numbersAsStrings(in: $1, at: "\(place)[\($0)]") }
        case .object(let members): members.flatMap { numbersAsStrings(in: $1, at: "\(place).\($0)") }
        default: []
        }
    }

    @Test(.timeLimit(.minutes(10)))
    func everyJSONOutputIsValidAndItsNumbersAreNumbers() throws {
        let sandbox = try Sandbox()
        let a = try sandbox.makeStore("a.db")
        let b = try sandbox.makeStore("b.db")
        let folder = try sandbox.makeDirectory("shared")
        // Titles and tags that are not numbers: any string that reads as one is a number printed as text.
        let id = try a.addReminder("Renew passport", "--due", "2026-12-01T09:00:00Z", "--priority", "high", "--tag", "errands")
        try a.addNote("Trip ideas", "--body", "Lisbon", "--tag", "travel")
        try a.ok("sync", "--folder", folder)
        try b.ok("sync", "--folder", folder)
        try a.ok("reminder", "edit", id, "--title", "Renew the passport")
        try b.ok("reminder", "edit", id, "--title", "Renew both passports")
        try a.ok("sync", "--folder", folder)
        try b.ok("sync", "--folder", folder)
        try a.ok("sync", "--folder", folder)
        let importFile = try sandbox.write(Data(try a.ok("note", "list", "--all", "--json").utf8), to: "notes.json")
        let bench = ["--records", "200", "--runs", "1", "--json"]

        let runs: [String: [String]] = [
            "reminder list": ["reminder", "list", "--all", "--json"],
            "reminder due": ["reminder", "due", "--at", "2026-12-02T00:00:00Z", "--json"],
            "note list": ["note", "list", "--all", "--json"],
            "show": ["show", id, "--json"],
            "status": ["status", "--json"],
            "log": ["log", "--limit", "5", "--json"],
            "changes": ["changes", "--since", "{}", "--json"],
            "history": ["history", id, "--json"],
            "conflicts": ["conflicts", "--json"],
            "import": ["import", importFile, "--json"],
            "verify": ["verify", "--json"],
            "compact": ["compact", "--json"],
            "replica list": ["replica", "list", "--json"],
            "bench merge": ["bench", "merge"] + bench,
            "bench writes": ["bench", "writes"] + bench,
            "bench calls": ["bench", "calls", "--writes", "20", "--records", "200", "--runs", "1", "--json"],
            "bench export": ["bench", "export"] + bench,
            "bench folder-sync": ["bench", "folder-sync", "--files", "50", "--runs", "1", "--json"],
            "bench peer": ["bench", "peer"] + bench,
            "bench live": ["bench", "live", "--changes", "20", "--json"],
            "bench relay": [
                "bench", "relay", "--changes", "20", "--records", "200", "--runs", "1", "--spaces", "10", "--rates", "20", "--seconds", "1", "--json",
            ],
            "bench history": ["bench", "history", "--records", "200", "--writes", "100", "--runs", "1", "--json"],
            "bench import": ["bench", "import"] + bench,
            "bench compact": ["bench", "compact", "--records", "200", "--updates-per-record", "5", "--json"],
        ]
        let discovered = try commandsTakingJSON(sandbox)
        #expect(discovered.subtracting(runs.keys).isEmpty, "commands with --json that this test does not run: \(discovered.subtracting(runs.keys).sorted())")

        for (command, arguments) in runs.sorted(by: { $0.key < $1.key }) where discovered.contains(command) {
            // The benchmarks build their own stores.
            let result = try sandbox.run(arguments + (command.hasPrefix("bench ") ? [] : ["--store", a.path]))
            #expect(result.succeeded, "\(command): \(result)")
            let lines = command == "changes" ? result.stdoutLines : [result.out]
            for line in lines {
                guard let value = try? OrderedJSON.parse(line) else {
                    Issue.record("\(command) printed what is not JSON: \(line.prefix(500))")
                    continue
                }
                let strings = numbersAsStrings(in: value)
                #expect(strings.isEmpty, "\(command) prints numbers as strings: \(strings)")
            }
        }
    }
}
