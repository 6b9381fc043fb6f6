import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Cuts off a client that sends its request too slowly (SPEC.md §16.3), as a slowloris does to
/// hold a server's connections with a byte now and then, which an idle timeout never sees: a
/// request's head must arrive whole within `timeout` of the connection's opening or of the
/// answer before it, and its body within `timeout` more, plus a second for each 64 KiB its
/// `Content-Length` gives. A client too slow is answered 408 `timeout` (if no answer has begun)
/// and its connection closed. While the relay answers (a listing that waits, say), no deadline runs.
final class RequestDeadlines: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The slowest a body may arrive, on average, after the first `timeout`.
    static let bodyBytesPerSecond: Int64 = 64 << 10

    private let timeout: TimeAmount
    private var deadline: Scheduled<Void>?
    /// An answer has begun and not ended: a 408 cannot be written in its midst.
    private var answering = false

    init(timeout: Duration) {
        self.timeout = TimeAmount(timeout)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(timeout, context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stop()
    }

    func channelActive(context: ChannelHandlerContext) {
        start(timeout, context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stop()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let request):
            let length = request.headerFields[.contentLength].flatMap { Int64($0) } ?? 0
            start(timeout + .seconds(max(0, length) / Self.bodyBytesPerSecond), context)
        case .body:
            break
        case .end:
            stop()
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head:
            answering = true
        case .body:
            break
        case .end:
            answering = false
            start(timeout, context)
        }
        context.write(data, promise: promise)
    }

    private func start(_ limit: TimeAmount, _ context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = context.eventLoop.assumeIsolated().scheduleTask(in: limit) { [self] in
            deadline = nil
            expire(context)
        }
    }

    private func stop() {
        deadline?.cancel()
        deadline = nil
    }

    private func expire(_ context: ChannelHandlerContext) {
        if !answering {
            let body = RelayServer.refusalBody(code: "timeout", message: "a request must arrive within \(timeout.nanoseconds / 1_000_000_000) s (its body at 64 KiB a second after that)")
            var fields = HTTPFields()
            fields[.contentType] = "application/json"
            fields[.contentLength] = String(body.count)
            fields[.connection] = "close"
            context.write(wrapOutboundOut(.head(HTTPResponse(status: .requestTimeout, headerFields: fields))), promise: nil)
            context.write(wrapOutboundOut(.body(ByteBuffer(bytes: body))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
        context.close(promise: nil)
    }
}
