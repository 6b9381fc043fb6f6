import Metrics

/// What a relay counts (SPEC.md §16.6, "Metrics"), through swift-metrics: whatever back end the
/// process bootstrapped (`syncctl relay --metrics` serves them to Prometheus), or none. Sums over
/// every space, never one space's own: they tell an operator nothing the relay's log does not.
struct RelayMetrics: Sendable {
    /// Files stored (answered 201).
    let filesStored = Counter(label: "concord_relay_files_stored_total")
    /// The bytes of those files.
    let bytesStored = Counter(label: "concord_relay_bytes_stored_total")
    /// Files deleted, one at a time or in requests of deletions (not with their space).
    let filesDeleted = Counter(label: "concord_relay_files_deleted_total")
    /// Listings waiting for a change now.
    let waitingListings = Meter(label: "concord_relay_waiting_listings")
    /// Requests refused 503 `unavailable`: the back end failed them.
    let storageFailures = Counter(label: "concord_relay_storage_failures_total")
}
