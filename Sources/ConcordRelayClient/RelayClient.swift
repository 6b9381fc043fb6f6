import AsyncHTTPClient
import ConcordCore
import ConcordKeys
import ConcordRelayProtocol
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// The requests of SPEC.md §16.3, signed with a space's credentials (§16.2): one device's view of
/// one relay. It holds no connection of its own: one HTTP client of the process pools them.
public struct RelayClient: Sendable {
    /// The relay, as given: `http://HOST:PORT` or `https://HOST:PORT`, with no path.
    public let url: String
    private let credentials: RelayCredentials
    private let nowMillis: @Sendable () -> UInt64
    private let http: HTTPClient
    /// The most a listing may take (a space of 10,000 files lists in about 1.3 MB).
    private static let maxListingBytes = 16 << 20
    /// The most a downloaded file may take: a relay's own limit is at most this.
    private static let maxFileBytes = 256 << 20

    /// A client of the relay at `url` for the space of `key`. A URL that is not `http://` or
    /// `https://` with a host, and nothing after its port but an optional `/`, is refused.
    public init(url: String, key: SyncKey, nowMillis: @escaping @Sendable () -> UInt64 = { UInt64(Date().timeIntervalSince1970 * 1000) }) throws(ConcordError) {
        try self.init(url: url, key: key, http: Self.shared, nowMillis: nowMillis)
    }

    /// A client that sends its requests through `http` rather than the process's client: a load
    /// generator's own, whose pool may hold thousands of connections to one relay (the process's
    /// holds at most 8 a host, and queues requests beyond them).
    package init(url: String, key: SyncKey, http: HTTPClient, nowMillis: @escaping @Sendable () -> UInt64 = { UInt64(Date().timeIntervalSince1970 * 1000) }) throws(ConcordError) {
        self.url = try Self.relayURL(url)
        credentials = RelayCredentials(key: key)
        self.http = http
        self.nowMillis = nowMillis
    }

    /// `url` as a client keeps it, without a `/` at its end (§16.5); a URL that is not `http://`
    /// or `https://` with a host, and nothing after its port, is refused (`invalidInput`).
    public static func relayURL(_ url: String) throws(ConcordError) -> String {
        var trimmed = url
        while trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard let parsed = URL(string: trimmed), ["http", "https"].contains(parsed.scheme ?? ""), parsed.host?.isEmpty == false,
              parsed.path.isEmpty, parsed.query == nil, parsed.fragment == nil, parsed.user == nil
        else {
            throw ConcordError(.invalidInput, "'\(url)' is not a relay's URL: http://HOST:PORT or https://HOST:PORT")
        }
        return trimmed
    }

    /// The process's HTTP client. A connection that cannot be made fails its request at once
    /// (after at most 10 s): a one-shot sync says so, and a live one waits and tries again (§16.5).
    private static let shared: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.timeout.connect = .seconds(10)
        configuration.connectionPool.retryConnectionEstablishment = false
        // Idle connections are closed here before a relay closes them (30 s after its last
        // answer by default, §16.3), so that a request is never sent on one the relay is closing.
        configuration.connectionPool.idleTimeout = .seconds(20)
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// The space this client reads and writes.
    public var space: String { credentials.space }

    /// The space's files and cursor. With `waitingFrom`, the relay answers once the cursor is no
    /// longer that one, or after `wait` (at most the relay's own limit).
    public func listing(waitingFrom cursor: Int64? = nil, wait: Duration = .seconds(25)) async throws(ConcordError) -> RelayListing {
        var target = "/v1/spaces/\(space)/files"
        if let cursor { target += "?cursor=\(cursor)&wait=\(wait.components.seconds)" }
        let timeout: TimeAmount = cursor == nil ? .seconds(60) : .seconds(wait.components.seconds + 60)
        let body = try await send(.GET, target, timeout: timeout, maxBytes: Self.maxListingBytes, expecting: [.ok])
        struct Listing: Decodable {
            struct File: Decodable { var name: String, sha256: String, size: Int }
            var cursor: Int64
            var files: [File]
        }
        guard let listing = try? JSONDecoder().decode(Listing.self, from: Data(body.bytes)) else {
            throw ConcordError(.relay, "the relay at \(url) answered a listing with something that is not one")
        }
        var files: [RelayFile] = []
        for file in listing.files {
            guard RelayNames.isFile(file.name), let sha256 = [UInt8](lowercaseHex: file.sha256), sha256.count == 32, file.size >= 0 else {
                throw ConcordError(.relay, "the relay at \(url) listed a file that is not a bundle's: \(file.name)")
            }
            files.append(RelayFile(name: file.name, sha256: sha256, size: file.size))
        }
        return RelayListing(files: files, cursor: listing.cursor)
    }

    /// The bytes of `file`, checked against the SHA-256 the listing gave (`corrupt` if they do
    /// not match); nil if the relay no longer holds it (its publisher coalesced it away meanwhile).
    public func download(_ file: RelayFile) async throws(ConcordError) -> [UInt8]? {
        let response = try await send(
            .GET, "/v1/spaces/\(space)/files/\(file.name)", timeout: .seconds(300), maxBytes: Self.maxFileBytes, expecting: [.ok, .notFound])
        guard response.status == .ok else { return nil }
        guard Array(SHA256.hash(data: response.bytes)) == file.sha256 else {
            throw ConcordError(.corrupt, "the relay at \(url) sent other bytes for \(file.name) than it listed (SHA-256 differs)")
        }
        return response.bytes
    }

    /// Stores `bytes` under `name`; true if the relay stored it now or held the very same file
    /// already. A relay that holds another file under the name (`nameTaken`) is an error.
    public func upload(_ bytes: [UInt8], as name: String) async throws(ConcordError) {
        _ = try await send(.PUT, "/v1/spaces/\(space)/files/\(name)", body: bytes, timeout: .seconds(300), maxBytes: 1 << 16, expecting: [.ok, .created])
    }

    /// Deletes the files of `names`, a request of deletions (one transaction of the relay) for
    /// each 1,000 of them; those the relay held, in name order.
    @discardableResult
    public func delete(_ names: [String]) async throws(ConcordError) -> [String] {
        let names = Array(Set(names)).sorted()
        var deleted: [String] = []
        for start in stride(from: 0, to: names.count, by: Self.maxDeletions) {
            let part = names[start..<min(start + Self.maxDeletions, names.count)]
            let response = try await send(
                .POST, "/v1/spaces/\(space)/deletions", body: Self.deletionsBody(part), timeout: .seconds(60), maxBytes: 1 << 20,
                expecting: [.ok, .notFound, .methodNotAllowed])
            guard response.status == .ok else {
                // A relay older than requests of deletions (its router knows no such path): one
                // request a file, as it takes them.
                for name in part where try await deleteOne(name) { deleted.append(name) }
                continue
            }
            struct Deleted: Decodable { var deleted: [String] }
            guard let answer = try? JSONDecoder().decode(Deleted.self, from: Data(response.bytes)) else {
                throw ConcordError(.relay, "the relay at \(url) answered deletions with something unexpected")
            }
            deleted += answer.deleted
        }
        return deleted
    }

    /// Deletes one file; whether the relay held it.
    private func deleteOne(_ name: String) async throws(ConcordError) -> Bool {
        let response = try await send(.DELETE, "/v1/spaces/\(space)/files/\(name)", timeout: .seconds(60), maxBytes: 1 << 16, expecting: [.noContent, .notFound])
        return response.status == .noContent
    }

    /// The most names a request of deletions carries (§16.3).
    private static let maxDeletions = 1000

    /// The body of a request of deletions (§16.3): `{"names":[…]}`, canonical JSON, the names as given.
    static func deletionsBody(_ names: some Sequence<String>) -> [UInt8] {
        Array(JSON.object([("names", .array(names.map { .string($0) }))]).canonical.utf8)
    }

    /// Deletes every file of the space; how many there were.
    public func deleteSpace() async throws(ConcordError) -> Int {
        let response = try await send(.DELETE, "/v1/spaces/\(space)", timeout: .seconds(60), maxBytes: 1 << 16, expecting: [.ok])
        struct Deleted: Decodable { var deleted: Int }
        guard let deleted = try? JSONDecoder().decode(Deleted.self, from: Data(response.bytes)) else {
            throw ConcordError(.relay, "the relay at \(url) answered a deletion with something unexpected")
        }
        return deleted.deleted
    }

    /// Why a request failed, in the words of the system where it has them.
    static func reason(_ error: any Error) -> String {
        switch error {
        case let error as NIOConnectionError:
            if let dns = error.dnsAError ?? error.dnsAAAAError { return "cannot find host \(error.host) (\(dns))" }
            if let first = error.connectionErrors.first { return reason(first.error) }
            return "cannot connect to \(error.host):\(error.port)"
        case let error as IOError:
            return String(cString: strerror(error.errnoCode))
        case let error as HTTPClientError where error == .connectTimeout:
            return "no connection within 10 s"
        case let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout:
            return "no answer in time"
        case let error as HTTPClientError where error == .remoteConnectionClosed:
            return "the relay closed the connection"
        default:
            return "\(error)"
        }
    }

    // MARK: Requests

    private struct Answer {
        var status: HTTPResponseStatus
        var bytes: [UInt8]
    }

    private func send(
        _ method: HTTPMethod, _ target: String, body: [UInt8] = [], timeout: TimeAmount, maxBytes: Int, expecting: [HTTPResponseStatus]
    ) async throws(ConcordError) -> Answer {
        var request = HTTPClientRequest(url: url + target)
        request.method = method
        request.headers.add(
            name: "Concord-Auth",
            value: credentials.authorization(method: method.rawValue, target: target, timestampMillis: nowMillis(), body: body))
        if !body.isEmpty {
            request.headers.add(name: "Content-Type", value: "application/octet-stream")
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let answer: Answer
        do {
            let response = try await http.execute(request, timeout: timeout)
            answer = Answer(status: response.status, bytes: Array(buffer: try await response.body.collect(upTo: maxBytes)))
        } catch is CancellationError {
            throw ConcordError(.closed, "the request to the relay at \(url) was cancelled")
        } catch is NIOTooManyBytesError {
            throw ConcordError(.relay, "the relay at \(url) answered with more than \(maxBytes) bytes")
        } catch {
            throw ConcordError(.relay, "cannot reach the relay at \(url): \(Self.reason(error))", cause: error)
        }
        guard expecting.contains(answer.status) else {
            struct Refusal: Decodable { var error: String, message: String }
            if let refusal = try? JSONDecoder().decode(Refusal.self, from: Data(answer.bytes)) {
                throw ConcordError(.relay, "the relay at \(url) refused: \(refusal.message) (\(answer.status.code) \(refusal.error))")
            }
            throw ConcordError(.relay, "the relay at \(url) answered \(answer.status.code) \(answer.status.reasonPhrase)")
        }
        return answer
    }
}
