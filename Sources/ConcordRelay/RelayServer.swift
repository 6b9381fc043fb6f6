import ConcordCore
import ConcordKeys
import ConcordRelayProtocol
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Metrics
import NIOCore
import ServiceLifecycle

/// What a relay allows (SPEC.md §16.4).
public struct RelayLimits: Hashable, Sendable {
    /// The largest file an upload may carry.
    public var maxFileBytes: Int
    /// Each space's quota.
    public var quota: RelayQuota
    /// The longest a list request may wait for a change.
    public var maxWait: Duration
    /// The longest a client may take to send a request's head, and its body beyond the time its
    /// size allows at 64 KiB a second (§16.3): a slower one is refused 408 and cut off.
    public var requestTimeout: Duration

    /// The limits of `syncctl relay` by default: files of 64 MiB, spaces of 1 GiB in 10,000 files,
    /// waits of a minute, requests sent within 30 s.
    public init(
        maxFileBytes: Int = 64 << 20, quota: RelayQuota = RelayQuota(bytes: 1 << 30, files: 10_000), maxWait: Duration = .seconds(60),
        requestTimeout: Duration = .seconds(30)
    ) {
        self.maxFileBytes = maxFileBytes
        self.quota = quota
        self.maxWait = maxWait
        self.requestTimeout = requestTimeout
    }
}

/// The relay's HTTP interface (SPEC.md §16.3): a space's files listed, read, stored and deleted
/// by devices that prove they hold its sync key (§16.2), over any `RelayStorage`.
public struct RelayServer: Sendable {
    private let storage: any RelayStorage
    private let limits: RelayLimits
    private let nowMillis: @Sendable () -> UInt64
    private let logger: Logger
    private let metrics = RelayMetrics()
    private let countsRequests: Bool

    /// - Parameters:
    ///   - countsRequests: whether each request is also counted and timed by route, method and
    ///     status through swift-metrics (§16.6, Hummingbird's `MetricsMiddleware`): it costs every
    ///     answer a flush or two, so only a relay whose metrics are read should. The relay's own
    ///     counts (files and bytes stored, deletions, waiting listings, failures) are kept anyway.
    ///   - nowMillis: the relay's clock, milliseconds since the epoch (injected by tests).
    public init(
        storage: any RelayStorage, limits: RelayLimits = RelayLimits(), logger: Logger, countsRequests: Bool = false,
        nowMillis: @escaping @Sendable () -> UInt64 = { UInt64(Date().timeIntervalSince1970 * 1000) }
    ) {
        self.storage = storage
        self.limits = limits
        self.logger = logger
        self.countsRequests = countsRequests
        self.nowMillis = nowMillis
    }

    /// The application serving on `host:port` (port 0 picks a free one); `onRunning` is told the
    /// port once it listens. `runService()` runs it until SIGINT or SIGTERM, then stops listening,
    /// answers the listings that wait for a change at once, and finishes the requests under way.
    public func application(host: String, port: Int, onRunning: @escaping @Sendable (Int) async -> Void) -> some ApplicationProtocol {
        let router = Router()
        // Each request counted and timed by route (`/v1/spaces/{space}/files`, never a space's
        // name), method and status, through swift-metrics.
        if countsRequests { router.middlewares.add(MetricsMiddleware()) }
        router.get("v1/health") { _, _ in Self.json(.ok, .object([("status", .string("ok"))])) }
        router.get("v1/spaces/:space/files") { request, context in try await self.answering(request) { try await self.list(request, context) } }
        router.get("v1/spaces/:space/files/:name") { request, context in try await self.answering(request) { try await self.download(request, context) } }
        router.put("v1/spaces/:space/files/:name") { request, context in try await self.answering(request) { try await self.upload(request, context) } }
        router.delete("v1/spaces/:space/files/:name") { request, context in try await self.answering(request) { try await self.deleteFile(request, context) } }
        router.post("v1/spaces/:space/deletions") { request, context in try await self.answering(request) { try await self.deleteFiles(request, context) } }
        router.delete("v1/spaces/:space") { request, context in try await self.answering(request) { try await self.deleteSpace(request, context) } }
        var application = Application(
            router: router,
            // A client that sends its request too slowly is cut off (RequestDeadlines), and a
            // connection idle for 90 s; a listing that waits for a change waits at most
            // maxWait, below that.
            server: .http1(configuration: .init(
                additionalChannelHandlers: [RequestDeadlines(timeout: limits.requestTimeout)], idleTimeout: .seconds(90))),
            configuration: .init(address: .hostname(host, port: port), serverName: "concord-relay"),
            services: storage.services,
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) },
            logger: frameworkLogger)
        application.beforeServerStarts { [storage] in try await storage.prepare() }
        return application
    }

    /// Hummingbird's own events (its start at `info`, each request at `debug`) are told only at
    /// `--log-level debug` and below: the relay tells its start itself, with the data it serves.
    private var frameworkLogger: Logger {
        var logger = logger
        if logger.logLevel > .debug { logger.logLevel = max(logger.logLevel, .notice) }
        return logger
    }

    // MARK: Requests

    /// `handle`'s answer, or its refusal; a request that its back end failed (the database not
    /// reachable, or not answering in time) is refused with 503 `unavailable`, which a device
    /// tries again. The cause goes to the log, not to the device.
    private func answering(_ request: Request, _ handle: () async throws -> Response) async throws -> Response {
        do {
            return try await handle()
        } catch let error as any HTTPResponseError {
            throw error
        } catch let error as CancellationError {
            throw error  // the connection closed: no one to answer
        } catch {
            logger.warning("\(request.method) \(request.uri.path) failed: \(String(reflecting: error))")
            metrics.storageFailures.increment()
            throw RelayRefusal(.serviceUnavailable, "the relay cannot reach its storage now; try again later")
        }
    }

    private func list(_ request: Request, _ context: some RequestContext) async throws -> Response {
        let space = try Self.space(context)
        try authenticate(request, space: space, body: [])
        let query = request.uri.queryParameters
        if !query.isEmpty {
            guard query.count == 2, let wait = query["wait"].flatMap({ Int($0) }), wait >= 0,
                  let cursor = query["cursor"].flatMap({ Int64($0) })
            else {
                throw RelayRefusal(.badRequest, "a listing takes no parameters, or cursor=C and wait=W, both whole numbers")
            }
            metrics.waitingListings.increment()
            defer { metrics.waitingListings.decrement() }
            do {
                try await cancelWhenGracefulShutdown {
                    try await storage.waitForChange(of: space, from: cursor, timeout: min(.seconds(wait), limits.maxWait))
                }
            } catch is CancellationError {
                // The relay is stopping: the listing as it is now.
            }
        }
        let listing = try await storage.listing(of: space)
        let files = listing.files.map { file in
            JSON.object([("name", .string(file.name)), ("sha256", .string(file.sha256.hexString)), ("size", .int(Int64(file.size)))])
        }
        return Self.json(.ok, .object([("cursor", .int(listing.cursor)), ("files", .array(files))]))
    }

    private func download(_ request: Request, _ context: some RequestContext) async throws -> Response {
        let space = try Self.space(context)
        let name = try Self.name(context)
        try authenticate(request, space: space, body: [])
        guard let bytes = try await storage.contents(of: name, in: space) else {
            throw RelayRefusal(.notFound, "space \(space) holds no file \(name)")
        }
        return Response(
            status: .ok, headers: [.contentType: "application/octet-stream"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    private func upload(_ request: Request, _ context: some RequestContext) async throws -> Response {
        let space = try Self.space(context)
        let name = try Self.name(context)
        let body = try await Self.body(of: request, upTo: limits.maxFileBytes, "a file")
        try authenticate(request, space: space, body: body)
        // The relay holds only what it cannot read: bundles sealed with the space's key (§13.1).
        guard body.count >= Self.encryptedMagic.count + 1, Array(body.prefix(Self.encryptedMagic.count)) == Self.encryptedMagic else {
            throw RelayRefusal(.badRequest, "a relay stores only encrypted bundles (SPEC.md §13.1), and this is not one")
        }
        let sha256 = Array(SHA256.hash(data: body))
        let file = JSON.object([("name", .string(name)), ("sha256", .string(sha256.hexString)), ("size", .int(Int64(body.count)))])
        switch try await storage.store(body, sha256: sha256, as: name, in: space, quota: limits.quota) {
        case .stored:
            logger.info("stored \(name) (\(body.count) bytes) in space \(space)")
            metrics.filesStored.increment()
            metrics.bytesStored.increment(by: body.count)
            return Self.json(.created, file)
        case .alreadyHeld:
            return Self.json(.ok, file)
        case .nameTaken(let other):
            throw RelayRefusal(.conflict, "space \(space) holds another file named \(name) (SHA-256 \(other.hexString))", code: "nameTaken")
        case let .spaceFull(bytes, files):
            throw RelayRefusal(
                HTTPResponse.Status(code: 507, reasonPhrase: "Insufficient Storage"),
                "space \(space) is full: it holds \(bytes) bytes in \(files) files, and may hold \(limits.quota.bytes) bytes in \(limits.quota.files) files",
                code: "spaceFull")
        }
    }

    private func deleteFile(_ request: Request, _ context: some RequestContext) async throws -> Response {
        let space = try Self.space(context)
        let name = try Self.name(context)
        try authenticate(request, space: space, body: [])
        guard try await storage.delete([name], in: space) == [name] else { throw RelayRefusal(.notFound, "space \(space) holds no file \(name)") }
        logger.info("deleted \(name) from space \(space)")
        metrics.filesDeleted.increment()
        return Response(status: .noContent)
    }

    /// The most names one request of deletions may carry, and the most bytes its body may take.
    static let maxDeletions = 1000
    private static let maxDeletionsBytes = 1 << 16

    private func deleteFiles(_ request: Request, _ context: some RequestContext) async throws -> Response {
        let space = try Self.space(context)
        let body = try await Self.body(of: request, upTo: Self.maxDeletionsBytes, "a request of deletions")
        try authenticate(request, space: space, body: body)
        guard let names = try? JSONDecoder().decode(Deletions.self, from: Data(body)).names,
              (1...Self.maxDeletions).contains(names.count), names.allSatisfy(RelayNames.isFile)
        else {
            throw RelayRefusal(
                .badRequest, "deletions are a JSON object {\"names\":[NAME…]} of 1 to \(Self.maxDeletions) file names <replica id>-<serial>.cbundle")
        }
        let deleted = try await storage.delete(Array(Set(names)).sorted(), in: space)
        for name in deleted { logger.info("deleted \(name) from space \(space)") }
        metrics.filesDeleted.increment(by: deleted.count)
        return Self.json(.ok, .object([("deleted", .array(deleted.map { .string($0) }))]))
    }

    private func deleteSpace(_ request: Request, _ context: some RequestContext) async throws -> Response {
        let space = try Self.space(context)
        try authenticate(request, space: space, body: [])
        let count = try await storage.deleteSpace(space)
        return Self.json(.ok, .object([("deleted", .int(Int64(count)))]))
    }

    // MARK: Checks

    /// A request's body, read only up to `limit` bytes: a longer one is refused 413 (`WHAT may
    /// take at most LIMIT bytes`), never held whole.
    private static func body(of request: Request, upTo limit: Int, _ what: String) async throws -> [UInt8] {
        do {
            return Array(buffer: try await request.body.collect(upTo: limit))
        } catch is NIOTooManyBytesError {
            throw RelayRefusal(.contentTooLarge, "\(what) may take at most \(limit) bytes")
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            // The client's fault (it went away, or was cut off for sending too slowly), not the
            // storage's: nothing to log, and no one to answer.
            throw RelayRefusal(.badRequest, "the request ended before its body did")
        }
    }

    private func authenticate(_ request: Request, space: String, body: [UInt8]) throws {
        if let refusal = RelayAuthorization.refusal(
            header: request.headers[Self.authField], space: space, method: request.method.rawValue,
            target: request.uri.string, body: body, nowMillis: nowMillis())
        {
            throw RelayRefusal(.unauthorized, refusal)
        }
    }

    private static func space(_ context: some RequestContext) throws -> String {
        let space = context.parameters.get("space") ?? ""
        guard RelayNames.isSpace(space) else {
            throw RelayRefusal(.badRequest, "a space is named by 32 lowercase hex digits")
        }
        return space
    }

    private static func name(_ context: some RequestContext) throws -> String {
        let name = context.parameters.get("name") ?? ""
        guard RelayNames.isFile(name) else {
            throw RelayRefusal(.badRequest, "a file is named as in a shared folder: <replica id>-<serial>.cbundle (SPEC.md §14)")
        }
        return name
    }

    static let authField = HTTPField.Name("Concord-Auth")!
    /// The first bytes of an encrypted bundle: its magic, then format version 1 (§13.1).
    private static let encryptedMagic: [UInt8] = [0x89, 0x43, 0x4E, 0x43, 0x45, 0x0D, 0x0A, 0x1A, 0x01]

    static func json(_ status: HTTPResponse.Status, _ value: JSON) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: body(value))))
    }

    /// A refusal's body (§16.3): `{"error":CODE,"message":TEXT}` and a line feed.
    static func refusalBody(code: String, message: String) -> [UInt8] {
        body(.object([("error", .string(code)), ("message", .string(message))]))
    }

    private static func body(_ value: JSON) -> [UInt8] {
        var bytes: [UInt8] = []
        value.write(into: &bytes)
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }
}

/// The body of a request of deletions (§16.3).
private struct Deletions: Decodable {
    var names: [String]
}

/// A request the relay refuses (SPEC.md §16.3): its status, and a JSON body
/// `{"error":CODE,"message":TEXT}`.
struct RelayRefusal: HTTPResponseError {
    let status: HTTPResponse.Status
    let code: String
    let message: String

    init(_ status: HTTPResponse.Status, _ message: String, code: String? = nil) {
        self.status = status
        self.message = message
        self.code = code ?? Self.code(of: status)
    }

    private static func code(of status: HTTPResponse.Status) -> String {
        switch status {
        case .badRequest: "badRequest"
        case .unauthorized: "unauthorized"
        case .notFound: "notFound"
        case .contentTooLarge: "tooLarge"
        case .serviceUnavailable: "unavailable"
        default: "refused"
        }
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        Response(
            status: status, headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: RelayServer.refusalBody(code: code, message: message))))
    }
}
