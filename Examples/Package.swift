// swift-tools-version: 6.1
import PackageDescription

// Three small programs that use only Concord's public API, one for each kind of app it serves.
// A package of its own (as Benchmarks/), built and run by CI: `swift run RemindersApp`,
// `swift run Widget`, `swift run PeerSync`.
let package = Package(
    name: "ConcordExamples",
    platforms: [.macOS(.v15)],
    dependencies: [
        // Named, so that the products are found whatever the checkout's folder is called.
        .package(name: "Concord", path: "../"),
    ],
    targets: [
        // A reminders app on two devices, syncing through a shared folder.
        .executableTarget(
            name: "RemindersApp",
            dependencies: [.product(name: "Concord", package: "Concord")]
        ),
        // A widget that reads the store while another process (the app) writes it: it links the
        // store alone.
        .executableTarget(
            name: "Widget",
            dependencies: [.product(name: "ConcordStore", package: "Concord")]
        ),
        // Two devices syncing over TCP with a sync key.
        .executableTarget(
            name: "PeerSync",
            dependencies: [.product(name: "Concord", package: "Concord")]
        ),
    ]
)
