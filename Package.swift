// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "Concord",
    platforms: [.macOS(.v13), .iOS(.v16)],
    products: [
        // What an app imports: `import Concord` (the modules below, but the relay's server).
        .library(name: "Concord", targets: ["Concord"]),
        .library(name: "ConcordCore", targets: ["ConcordCore"]),
        .library(name: "ConcordStore", targets: ["ConcordStore"]),
        .library(name: "ConcordWire", targets: ["ConcordWire"]),
        .library(name: "ConcordExchange", targets: ["ConcordExchange"]),
        .library(name: "ConcordKeys", targets: ["ConcordKeys"]),
        .library(name: "ConcordPeer", targets: ["ConcordPeer"]),
        .library(name: "ConcordNet", targets: ["ConcordNet"]),
        .library(name: "ConcordWorkload", targets: ["ConcordWorkload"]),
        .library(name: "ConcordRelayProtocol", targets: ["ConcordRelayProtocol"]),
        .library(name: "ConcordRelay", targets: ["ConcordRelay"]),
        .library(name: "ConcordRelayClient", targets: ["ConcordRelayClient"]),
        .executable(name: "syncctl", targets: ["syncctl"]),
        // The C interface (Sources/ConcordC/include/concord.h), for other languages: the JVM binding.
        .library(name: "ConcordC", type: .dynamic, targets: ["ConcordC"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        // The relay's server (SPEC.md §16), without swift-configuration (a default trait).
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        // The relay's client.
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        // The HTTP parts that the relay's request deadlines see (as Hummingbird's pipeline has them).
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        // The relay's metrics: counted through swift-metrics, shown to Prometheus by syncctl.
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
    ],
    targets: [
        // The umbrella of an app's modules (Sources/Concord/Concord.swift).
        .target(
            name: "Concord",
            dependencies: [
                "ConcordCore", "ConcordStore", "ConcordKeys", "ConcordExchange", "ConcordPeer", "ConcordNet",
                "ConcordRelayClient",
            ]
        ),
        // The pure merge core: no I/O, no dependencies.
        .target(name: "ConcordCore"),
        // The replica store over SQLite.
        .target(
            name: "ConcordStore",
            dependencies: [
                "ConcordCore",
                "ConcordKeys",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                // `Logger.silent`, the default logger of the modules above it.
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The system libzstd (Debian: libzstd-dev; macOS: brew install zstd).
        .systemLibrary(
            name: "CZstd",
            pkgConfig: "libzstd",
            providers: [.apt(["libzstd-dev"]), .brew(["zstd"])]
        ),
        // The wire formats, with no I/O and no store: operations blocks, bundles (SPEC.md §13),
        // encrypted bundles (§13.1) and zstd. Below both the exchange layer and the peer protocol.
        .target(
            name: "ConcordWire",
            dependencies: [
                "ConcordCore",
                "ConcordKeys",
                "CZstd",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // Bundle files of a store, and sync through a shared folder.
        .target(
            name: "ConcordExchange",
            dependencies: [
                "ConcordCore",
                "ConcordStore",
                "ConcordKeys",
                "ConcordWire",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                // The shared folders' records, in the store's own tables (FolderRecords.swift).
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // Sync keys (SPEC.md §15.1): their text form and key derivation. Kept apart from the peer
        // protocol so that the store can hold one, and the exchange layer encrypt folder bundles
        // with it, without linking the protocol.
        .target(
            name: "ConcordKeys",
            dependencies: ["ConcordCore", .product(name: "Crypto", package: "swift-crypto")]
        ),
        // The peer-to-peer protocol (SPEC.md §15) as a state machine: framing, handshake,
        // encrypted messages, the exchange. No I/O and no store: a transport carries its bytes.
        .target(
            name: "ConcordPeer",
            dependencies: [
                "ConcordCore",
                "ConcordKeys",
                "ConcordWire",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The peer protocol carried over TCP with SwiftNIO: `syncctl serve` and `sync --peer`.
        .target(
            name: "ConcordNet",
            dependencies: [
                "ConcordCore",
                "ConcordStore",
                "ConcordKeys",
                "ConcordPeer",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The relay's protocol (SPEC.md §16) without I/O: credentials and the requests'
        // signatures (§16.2), the names and listings of §16.3. Shared by its server and client.
        .target(
            name: "ConcordRelayProtocol",
            dependencies: [
                "ConcordCore", "ConcordKeys",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The relay's server (`syncctl relay`): HTTP with Hummingbird over a storage back end.
        .target(
            name: "ConcordRelay",
            dependencies: [
                "ConcordCore",
                "ConcordKeys",
                "ConcordRelayProtocol",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // A store's sync through a relay (`syncctl sync --relay`): a mirror folder kept in step
        // with the relay over HTTP, synced by the shared folder's rules.
        .target(
            name: "ConcordRelayClient",
            dependencies: [
                "ConcordCore",
                "ConcordKeys",
                "ConcordStore",
                "ConcordExchange",
                "ConcordRelayProtocol",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The seeded workloads that `syncctl bench` and Benchmarks/ measure.
        .target(
            name: "ConcordC",
            dependencies: ["ConcordCore", "ConcordKeys", "ConcordStore", "ConcordWire", "ConcordExchange", "ConcordNet", "ConcordRelayClient"],
            // The header is the interface's reference, for C callers; Swift does not read it.
            exclude: ["include"]
        ),
        .target(
            name: "ConcordWorkload",
            dependencies: ["ConcordCore", "ConcordStore", "ConcordExchange"]
        ),
        .executableTarget(
            name: "syncctl",
            dependencies: [
                "ConcordCore",
                "ConcordStore",
                "ConcordExchange",
                "ConcordKeys",
                "ConcordPeer",
                "ConcordNet",
                "ConcordWorkload",
                "ConcordRelay",
                "ConcordRelayClient",
                "ConcordRelayProtocol",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Helpers shared by the test targets.
        .target(
            name: "ConcordTestSupport",
            dependencies: ["ConcordCore", "ConcordStore", "ConcordExchange", "ConcordKeys", "ConcordNet"],
            path: "Tests/ConcordTestSupport"
        ),
        .testTarget(
            name: "ConcordCoreTests",
            dependencies: [
                "ConcordCore",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(
            name: "ConcordStoreTests",
            dependencies: [
                "ConcordCore",
                "ConcordStore",
                "ConcordTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(
            name: "ConcordExchangeTests",
            dependencies: [
                "ConcordCore",
                "ConcordStore",
                "ConcordTestSupport",
                "ConcordExchange",
                // The fuzz tests recompress mutated payloads so they get past the checksums.
                "CZstd",
                "ConcordKeys",
                // A test sets a store's tables by hand, to a state a killed compaction leaves.
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
        .testTarget(
            name: "ConcordPeerTests",
            dependencies: [
                "ConcordCore",
                "ConcordKeys",
                "ConcordPeer",
                "ConcordWire",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "ConcordNetTests",
            dependencies: [
                "ConcordCore",
                "ConcordStore",
                "ConcordTestSupport",
                "ConcordExchange",
                "ConcordKeys",
                "ConcordPeer",
                "ConcordNet",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "ConcordRelayTests",
            dependencies: [
                "ConcordCore",
                "ConcordKeys",
                "ConcordRelayProtocol",
                "ConcordRelay",
                "ConcordRelayClient",
                "ConcordTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ]
        ),
        .testTarget(
            name: "SyncctlTests",
            // The library modules build the large stores and bundles that the kill and
            // concurrency tests feed to the binary, and the errors whose advice syncctl adds.
            dependencies: [
                "ConcordCore", "ConcordStore", "ConcordExchange", "ConcordKeys", "ConcordPeer", "ConcordWorkload", "syncctl",
                // Requests to a relay made by hand, signed or not (RelayCommandTests).
                "ConcordRelayProtocol", "ConcordRelayClient", "ConcordTestSupport", .product(name: "AsyncHTTPClient", package: "async-http-client"),
                // The lists of random stores import as the same records (ImportRoundTripTests).
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
    ]
)
