// `import Concord`: what an app calls, in one import. The store and its records (ConcordStore,
// over the merge core's types), sync keys, bundles and shared folders, peer sync over TCP, and
// sync through a relay. The modules stay importable one by one, for a program that links less (a
// widget needs ConcordStore alone); the relay's server is not here, being no app's.
@_exported import ConcordCore
@_exported import ConcordExchange
@_exported import ConcordKeys
@_exported import ConcordNet
@_exported import ConcordPeer
@_exported import ConcordRelayClient
@_exported import ConcordStore
