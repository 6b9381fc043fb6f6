import ConcordCore
import ConcordStore

extension ConcordStore {
    /// Every operation in the log, in author and sequence order.
    public func allOperations() throws -> [Op] {
        var operations: [Op] = []
        try forEachOperation { operations.append($0) }
        return operations
    }
}
