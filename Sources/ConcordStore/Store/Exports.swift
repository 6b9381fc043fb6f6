// The module's rooms, one folder each:
// - Store/: what an app calls (`ConcordStore`: opening, reads, writes, their async forms,
//   observing, the sync key, verification) and its errors;
// - Merge/: the merge engine, the one way operations from elsewhere enter a store
//   (`MergePipeline.swift` tells its story; `MergeInParts` takes a peer's batches);
// - Rows/: how records and the log are laid out in SQLite, and the schema, which local writes and
//   merges share;
// - Files/: the files beside a store and the processes sharing it: writers' turns, the commit
//   bell, watching a file, reading a header without breaking SQLite's locks.

// The store speaks in the core's types (drafts, records, ids, operations): an app imports one module.
@_exported import ConcordCore
