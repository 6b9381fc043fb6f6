@_exported import ConcordTestSupport
