import ArgumentParser
import ConcordCore
import ConcordNet
import ConcordRelay
import ConcordStore
import Foundation
import Hummingbird
import Logging
import Metrics
import Prometheus
import ServiceLifecycle

/// `syncctl relay`: a relay for devices that never meet (SPEC.md §16), holding only what it
/// cannot read, on the embedded back end (one SQLite file).
struct Relay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Relay sealed bundles between devices that never meet, until SIGINT or SIGTERM.",
        discussion: """
            Devices sync through it with 'syncctl sync --relay http://HOST:PORT'. It never holds \
            a sync key: each space is what one key shares, its files are bundles sealed with that \
            key, and only a device that holds the key can read or write them. Listens on \
            127.0.0.1 (this machine only) unless --listen names a wider address.
            """)
    @Option(help: ArgumentHelp("Where to listen (port 0: any free port, printed).", valueName: "host:port"))
    var listen = "127.0.0.1:7430"
    @Option(help: ArgumentHelp("The directory of the relay's database (relay.db), made if missing (default ~/.concord-relay).", valueName: "dir"))
    var data: String?
    @Option(help: ArgumentHelp("A PostgreSQL database that any number of relay nodes share, instead of --data.", valueName: "postgres://user[:password]@host[:port]/database"))
    var postgres: String?
    @Option(help: "The largest file a device may upload, in bytes.") var maxFileBytes = 64 << 20
    @Option(help: "The most bytes one space's files may take together.") var quotaBytes = 1 << 30
    @Option(help: "The most files one space may hold.") var quotaFiles = 10_000
    @Option(help: "The seconds a client may take to send a request (its body at 64 KiB/s beyond them) before it is cut off.")
    var requestTimeout = 30
    @Option(help: ArgumentHelp("Serve the relay's metrics to Prometheus at http://HOST:PORT/metrics (off by default).", valueName: "host:port"))
    var metrics: String?
    @OptionGroup var log: LogOptions

    func validate() throws {
        if PeerAddress(listen, defaultPort: 7430) == nil { throw ValidationError("'\(listen)' is not HOST:PORT") }
        if let metrics, PeerAddress(metrics, defaultPort: 9430) == nil { throw ValidationError("'\(metrics)' is not HOST:PORT") }
        if data != nil, postgres != nil { throw ValidationError("give --data DIR or --postgres URL, not both") }
        if let postgres {
            do throws(ConcordError) {
                _ = try PostgresRelayStorage.redacted(postgres)
            } catch {
                throw ValidationError(error.message)
            }
        }
        guard maxFileBytes >= 1024, quotaBytes >= maxFileBytes, quotaFiles >= 1 else {
            throw ValidationError("--max-file-bytes must be at least 1024, --quota-bytes at least --max-file-bytes, --quota-files at least 1")
        }
        guard (1...3600).contains(requestTimeout) else { throw ValidationError("--request-timeout must be from 1 to 3600") }
    }

    func run() async throws {
        let address = PeerAddress(listen, defaultPort: 7430)!
        let logger = log.logger(label: "concord.relay")
        // Before the server makes its counters: they belong to the system bootstrapped.
        let registry = metrics.map { _ in PrometheusCollectorRegistry() }
        if let registry { MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry)) }
        let (storage, described) = try openStorage(logger: logger)
        let limits = RelayLimits(
            maxFileBytes: maxFileBytes, quota: RelayQuota(bytes: quotaBytes, files: quotaFiles), requestTimeout: .seconds(requestTimeout))
        let application = RelayServer(storage: storage, limits: limits, logger: logger, countsRequests: metrics != nil)
            .application(host: address.host, port: address.port) { port in
                logger.notice("relaying \(described) on \(address.host):\(port); stop with Ctrl-C", metadata: ["data": "\(described)", "port": "\(port)"])
            }
        var services: [any Service] = [application]
        if let registry, let address = metrics.flatMap({ PeerAddress($0, defaultPort: 9430) }) {
            services.append(Self.metricsApplication(registry, host: address.host, port: address.port, logger: logger))
        }
        do {
            // Until SIGINT or SIGTERM: then a graceful shutdown (RelayServer.application).
            try await Stop.run(services, logger: logger)
        } catch {
            let listeners = "\(address)" + (metrics.map { " (metrics on \($0))" } ?? "")
            throw ConcordError(.local, "the relay on \(listeners) stopped: \(error)", cause: error)
        }
        logger.notice("stopped")
    }

    /// `GET /metrics`: every metric of the process, in Prometheus's text format (§16.6).
    private static func metricsApplication(_ registry: PrometheusCollectorRegistry, host: String, port: Int, logger: Logger) -> some Service {
        let router = Router()
        router.get("metrics") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
        }
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .notice)
        return Application(
            router: router,
            // A scrape is one small request: a connection idle (or trickling) for 30 s is closed.
            server: .http1(configuration: .init(idleTimeout: .seconds(30))),
            configuration: .init(address: .hostname(host, port: port), serverName: "concord-relay"),
            onServerRunning: { channel in
                logger.notice("serving metrics on http://\(host):\(channel.localAddress?.port ?? port)/metrics", metadata: ["port": "\(channel.localAddress?.port ?? port)"])
            },
            logger: quiet)
    }

    /// The back end, and what the log calls it (a URL without its password).
    private func openStorage(logger: Logger) throws -> (any RelayStorage, String) {
        if let postgres {
            return (try PostgresRelayStorage(url: postgres, logger: logger), try PostgresRelayStorage.redacted(postgres))
        }
        let data = data ?? NSHomeDirectory() + "/.concord-relay"
        guard mkdir(data, 0o700) == 0 || errno == EEXIST else {
            throw ConcordError(.io, "cannot make the relay's directory \(data): \(String(cString: strerror(errno)))")
        }
        let path = data + "/relay.db"
        do {
            return (try SQLiteRelayStorage(path: path), path)
        } catch {
            throw ConcordError(.io, "cannot open the relay's database \(path): \(error)", cause: error)
        }
    }
}
