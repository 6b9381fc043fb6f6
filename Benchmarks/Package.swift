// swift-tools-version: 6.3
import PackageDescription

// A package of its own, so that library users never build the benchmark dependency.
let package = Package(
    name: "ConcordBenchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        // Named, so that the products below are found whatever the checkout's folder is called (a path
        // dependency is otherwise known by its folder name).
        .package(name: "Concord", path: "../"),
        .package(url: "https://github.com/ordo-one/package-benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "MergeBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "ConcordStore", package: "Concord"),
                .product(name: "ConcordExchange", package: "Concord"),
                .product(name: "ConcordWorkload", package: "Concord"),
            ],
            path: "Benchmarks/MergeBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
    ]
)
