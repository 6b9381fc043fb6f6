// The store speaks in the core's types (drafts, records, ids, operations): an app imports one module.
@_exported import ConcordCore
