// The bundle formats are part of this module's interface (`exportBundle` returns a
// `BundleSummary`): an app that imports ConcordExchange gets them.
@_exported import ConcordWire
