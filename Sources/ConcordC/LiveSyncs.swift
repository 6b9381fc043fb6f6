import ConcordCore
import ConcordNet
import ConcordRelayClient
import ConcordStore

// Syncs that stay on (concord.h, "Live sync"): subscriptions whose events are a live sync's.

/// Keeps a live session with a peer, as `syncctl sync --peer --live`.
@_cdecl("concord_sync_peer_live")
public func concord_sync_peer_live(
    _ handle: UInt64, _ address: UnsafePointer<CChar>?, _ callback: EventCallback?, _ context: UnsafeMutableRawPointer?,
    _ subscription: UnsafeMutablePointer<UInt64>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let store = try stores.get(handle)
        let peer = try peerAddress(try text(address, "the address"))
        try subscribe(callback, subscription) { callback in
            Subscription(store: store, callback: callback, context: context) { deliver in
                for try await event in PeerClient.live(store: store, address: peer) { await deliver(Reports.json(of: event).canonical) }
            }
        }
    }
}

/// One sync through a relay, as `syncctl sync --relay`.
@_cdecl("concord_sync_relay")
public func concord_sync_relay(
    _ handle: UInt64, _ url: UnsafePointer<CChar>?, _ report: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let report = try output(report)
        let sync = try RelaySync(store: try stores.get(handle), url: try text(url, "the URL"))
        give(Reports.json(of: try waitFor { () async throws(ConcordError) in try await sync.sync() }).canonical, to: report)
    }
}

/// Keeps the store and a relay in step, as `syncctl sync --relay --live`.
@_cdecl("concord_sync_relay_live")
public func concord_sync_relay_live(
    _ handle: UInt64, _ url: UnsafePointer<CChar>?, _ callback: EventCallback?, _ context: UnsafeMutableRawPointer?,
    _ subscription: UnsafeMutablePointer<UInt64>?, _ error: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    perform(error) {
        let store = try stores.get(handle)
        let sync = try RelaySync(store: store, url: try text(url, "the URL"))
        try subscribe(callback, subscription) { callback in
            Subscription(store: store, callback: callback, context: context) { deliver in
                for try await event in sync.live() { await deliver(Reports.json(of: event).canonical) }
            }
        }
    }
}

/// `text` as a peer's address, or a refusal.
func peerAddress(_ text: String) throws -> PeerAddress {
    guard let peer = PeerAddress(text) else { throw JSONInput.invalid("'\(escapingControlCharacters(text))' is not HOST:PORT") }
    return peer
}
