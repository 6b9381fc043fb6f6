import ConcordCore
import ConcordExchange
import ConcordStore
import Foundation
import Testing

/// Mutation fuzzing of the bundle decoder, the run decoder and the merge of bundles (issue 6,
/// "Hostile bytes"): valid bundles from the seed corpus are mutated at every layer (file bytes,
/// block payloads behind recomputed checksums, run headers, whole blocks, generated operations)
/// and each result must be refused with a one-line `BundleError` or read into valid operations;
/// some are merged into a real store, which must then be unchanged (refused) or sound (merged).
///
/// A short pass runs in CI; `scripts/fuzz` runs long ones (settings: `FuzzSettings`).
@Suite struct BundleFuzzTests {
    @Test(.timeLimit(.minutes(60)))
    func mutatedBundlesAreRefusedOrReadIntoValidOperations() throws {
        let seeds = try FuzzCorpus.load()
        let images = seeds.map { BundleImage(parsing: $0.bytes)! }
        let run = FuzzRun("bundle", defaultInputs: 1000)
        let merger = try FuzzMerger(run)
        var checker = BundleChecker(run: run, merger: merger)
        run.run { index, random in
            let seed = random.below(seeds.count)
            let other = random.below(seeds.count)
            let (strategy, input, expected) = BundleInputs.make(
                seed: seeds[seed].bytes, image: images[seed], other: seeds[other].bytes, otherImage: images[other], &random)
            run.count("strategy \(strategy)")
            run.begin(input)
            let merge = random.oneIn(run.settings.mergeEvery) || (expected != nil && random.oneIn(2))
            checker.check(input, index: index, expected: expected, merge: merge, &random)
        }
        let line = run.summary()
        #expect(run.findings.isEmpty, "\(line)\n\(run.findings.prefix(20).joined(separator: "\n"))")
        #expect(run.inputs > 0 || run.settings.only != nil)
    }

    /// `OperationCodec.decode` on its own: runs cut out of the seeds, mutated, with mutated
    /// first seqs and counts (the run decoder is also what reads a store's log).
    @Test(.timeLimit(.minutes(60)))
    func mutatedOperationRunsAreRefusedOrDecodedValid() throws {
        var runs: [(author: ReplicaID, firstSeq: UInt64, count: UInt64, bytes: [UInt8])] = []
        // Runs of their own are in rows; in columns their entries' parts are spread.
        for (_, bytes) in try FuzzCorpus.load() where BundleImage(parsing: bytes)!.layout == .rows {
            for block in BundleImage(parsing: bytes)!.blocks where block.type == 2 {
                let payload = try #require(OperationsPayload(parsing: block.raw, layout: .rows))
                for item in payload.runs {
                    runs.append((ReplicaID(bytes: payload.replicas[Int(item.author)])!, item.firstSeq, item.count, item.bytes))
                }
            }
        }
        #expect(runs.count >= 10)
        let run = FuzzRun("oprun", defaultInputs: 5000)
        run.run { index, random in
            var (author, firstSeq, count, bytes) = random.pick(runs)
            let other = random.pick(runs).bytes
            if !random.oneIn(8) { ByteMutations.mutate(&bytes, &random, other: other) }
            if random.oneIn(4) {
                firstSeq = random.pick([0, 1, 2, firstSeq &+ 1, firstSeq &- 1, 1 << 32, UInt64(Int64.max), 1 << 63, UInt64.max, UInt64.max &- count &+ 1, random.next()])
            }
            if random.oneIn(4) {
                count = random.pick([0, 1, count &+ 1, count &- 1, UInt64(bytes.count), UInt64(bytes.count + 1), 1 << 20, 1 << 40, UInt64(Int.max), UInt64.max, random.next()])
            }
            run.begin(bytes)
            let started = Date()
            let decoded: Result<[Op], DecodeError>
            do throws(DecodeError) {
                decoded = .success(try OperationCodec.decode(bytes, author: author, firstSeq: firstSeq, count: Int(truncatingIfNeeded: count)))
            } catch {
                decoded = .failure(error)
            }
            if Date().timeIntervalSince(started) > run.settings.slowSeconds {
                run.finding(index, "decoding took \(Date().timeIntervalSince(started)) s", input: bytes, extension: "oprun")
            }
            let notes = "author \(author.hex), first seq \(firstSeq), count \(Int(truncatingIfNeeded: count))"
            switch decoded {
            case .failure(let error):
                run.count("refused")
                if error.description.isEmpty || error.description.contains("\n") {
                    run.finding(index, "an error that is not one line: \(String(reflecting: error.description))", input: bytes, extension: "oprun", notes: notes)
                }
            case .success(let operations):
                run.count("decoded")
                var problems: [String] = []
                // Compacted seqs (SPEC.md §5.8) decode to no operation: a run may hold fewer than its count.
                if operations.count > Int(truncatingIfNeeded: count) { problems.append("\(operations.count) operations, more than \(count)") }
                var previous: UInt64?
                for (offset, operation) in operations.enumerated() {
                    let seq = operation.id.seq
                    if operation.id.replica != author || seq < firstSeq || seq - firstSeq >= count || previous.map({ seq <= $0 }) == true {
                        problems.append("operation \(offset) has id \(operation.id)")
                    }
                    previous = seq
                    do { try operation.validate() } catch { problems.append("decoded an invalid operation: \(error)") }
                }
                // Encoding what was decoded and decoding it again gives the same operations.
                var writer = ByteWriter()
                OperationCodec.encode(operations, into: &writer)
                if let again = try? OperationCodec.decode(writer.bytes, author: author, firstSeq: firstSeq, count: operations.count) {
                    if again != operations { problems.append("re-encoded operations decode differently") }
                } else if !operations.isEmpty {
                    problems.append("re-encoded operations do not decode")
                }
                if !problems.isEmpty { run.finding(index, problems.joined(separator: "; "), input: bytes, extension: "oprun", notes: notes) }
            }
        }
        let line = run.summary()
        #expect(run.findings.isEmpty, "\(line)\n\(run.findings.prefix(20).joined(separator: "\n"))")
    }

    /// Length fields claiming up to 4 GB, in block headers and inside payloads behind correct
    /// checksums, are refused before anything is allocated for them: the reader never asks its
    /// source for more than one block's limit, and the refusal is immediate.
    @Test func hugeLengthsAreRefusedBeforeAllocating() throws {
        let seeds = try FuzzCorpus.load()
        var refused = 0
        for (name, bytes) in seeds {
            let image = try #require(BundleImage(parsing: bytes))
            // Block headers: stored and raw lengths, checksums left as they are and recomputed.
            for block in blocks(of: bytes) {
                for field in [2, 6] {
                    for value: UInt32 in [0xFFFF_FFFF, 0x8000_0000, 0x0100_0001] {
                        for fix in [false, true] {
                            var copy = bytes
                            copy.replaceSubrange(block.offset + field..<block.offset + field + 4, with: ByteMutations.be32(value))
                            if fix { copy = BundleImage.fixingChecksums(copy) }
                            let (outcome, largest) = ReadOutcome.read(copy)
                            guard case .refused(let error) = outcome else {
                                Issue.record("\(name), \(block), field \(field) = \(value): \(outcome.label)")
                                continue
                            }
                            #expect(largest <= BundleFormat.maxBlockBytes, "\(name): asked for \(largest) bytes at once")
                            if case .corrupt(let why) = error, value > UInt32(BundleFormat.maxBlockBytes) {
                                #expect(why.contains("\(value)"), "\(name): \(why)")
                            }
                            refused += 1
                        }
                    }
                }
            }
            // The manifest's version vector sizes.
            if let manifestIndex = image.blocks.firstIndex(where: { $0.type == 1 }) {
                let raw = image.blocks[manifestIndex].raw
                var reader = ByteReader(raw)
                _ = try reader.bytes(16)
                _ = try reader.varint()
                let at = reader.offset
                let baseCount = try reader.varint()
                for huge: UInt64 in [0xFFFF_FFFF, 1 << 63, UInt64.max] {
                    var mutated = image
                    mutated.blocks[manifestIndex].raw = Array(raw[..<at]) + ByteMutations.varint(huge) + Array(raw[reader.offset...])
                    let (outcome, largest) = ReadOutcome.read(mutated.assemble())
                    #expect(largest <= BundleFormat.maxBlockBytes)
                    guard case .refused(.corrupt) = outcome else {
                        Issue.record("\(name): a manifest claiming \(huge) version vector entries (of \(baseCount)): \(outcome.label)")
                        continue
                    }
                    refused += 1
                }
            }
            // Inside operations payloads: table sizes, run counts, run lengths, seqs, string
            // lengths and dot counts set to 2^32−1, 2^63 and 2^64−1.
            for (blockIndex, block) in image.blocks.enumerated() where block.type == 2 {
                let payload = try #require(OperationsPayload(parsing: block.raw, layout: image.layout))
                for huge: UInt64 in [0xFFFF_FFFF, 1 << 63, UInt64.max] {
                    // The replica table's size.
                    var variants = [ByteMutations.varint(huge) + Array(block.raw.dropFirst(ByteMutations.varint(UInt64(payload.replicas.count)).count))]
                    if image.layout == .columns {
                        // Each column's length in turn.
                        var reader = ByteReader(payload.trailing)
                        while !reader.isAtEnd {
                            let at = reader.offset
                            let length = try reader.varint()
                            let after = reader.offset
                            _ = try reader.bytes(Int(length))
                            var changed = payload
                            changed.trailing = Array(payload.trailing[..<at]) + ByteMutations.varint(huge) + Array(payload.trailing[after...])
                            variants.append(changed.serialized())
                        }
                    }
                    for runIndex in payload.runs.indices {
                        for field in 0..<3 where image.layout == .rows || field != 1 {
                            var changed = payload
                            switch field {
                            case 0: changed.runs[runIndex].count = huge
                            case 1: changed.runs[runIndex].lengthOverride = huge
                            default: changed.runs[runIndex].author = huge
                            }
                            variants.append(changed.serialized())
                        }
                        // The first string length of the run, and a removeTag's dot count.
                        guard image.layout == .rows else { continue }
                        var stringLength = payload
                        stringLength.runs[runIndex].bytes = Self.withHugeStringLength(payload.runs[runIndex].bytes, huge)
                        if stringLength.runs[runIndex].bytes != payload.runs[runIndex].bytes { variants.append(stringLength.serialized()) }
                    }
                    for raw in variants {
                        var mutated = image
                        mutated.blocks[blockIndex].raw = raw
                        let input = mutated.assemble()
                        let started = Date()
                        let (outcome, largest) = ReadOutcome.read(input)
                        #expect(Date().timeIntervalSince(started) < 5)
                        #expect(largest <= BundleFormat.maxBlockBytes)
                        guard case .refused(.corrupt) = outcome else {
                            Issue.record("\(name): a payload with \(huge) in a length field: \(outcome.label)")
                            continue
                        }
                        refused += 1
                    }
                }
            }
        }
        #expect(refused > 100)
    }

    /// A run's bytes with the length of its first string (a field name, tag or value) made huge;
    /// unchanged when it has none that can be found simply.
    static func withHugeStringLength(_ bytes: [UInt8], _ huge: UInt64) -> [UInt8] {
        var reader = ByteReader(bytes)
        guard let header = try? reader.byte(), (try? reader.signedVarint()) != nil else { return bytes }
        if header & 0x04 == 0 { guard (try? reader.byte()) != nil, (try? reader.bytes(16)) != nil else { return bytes } }
        switch header & 0x03 {
        case 0:
            guard let code = try? reader.byte() else { return bytes }
            if code != 0 {
                guard (try? reader.byte()) == 4 else { return bytes }  // only a string value
            }
        default:
            break
        }
        let at = reader.offset
        guard (try? reader.varint()) != nil else { return bytes }
        return Array(bytes[..<at]) + ByteMutations.varint(huge) + Array(bytes[reader.offset...])
    }
}

// MARK: Making inputs

enum BundleInputs {
    /// One fuzz input from a seed: which strategy made it, its bytes, and for generated
    /// operations what a reader must return (nil for mutations, whose outcome is unknown).
    static func make(
        seed: [UInt8], image: BundleImage, other: [UInt8], otherImage: BundleImage, _ random: inout FuzzRandom
    ) -> (String, [UInt8], [Op]?) {
        switch random.below(16) {
        case 0, 1:
            var bytes = seed
            ByteMutations.mutate(&bytes, &random, other: other)
            return ("file", bytes, nil)
        case 2, 3, 4:
            var bytes = seed
            ByteMutations.mutate(&bytes, &random, other: other)
            return ("file, checksums fixed", BundleImage.fixingChecksums(bytes), nil)
        case 5, 6, 7:
            var mutated = image
            let block = random.below(mutated.blocks.count)
            ByteMutations.mutate(&mutated.blocks[block].raw, &random, other: otherImage.blocks.randomElement(using: &random)?.raw)
            return ("payload", assemble(mutated, &random), nil)
        case 8, 9, 10:
            var mutated = image
            guard let block = mutated.blocks.indices.filter({ mutated.blocks[$0].type == 2 }).randomElement(using: &random),
                  var payload = OperationsPayload(parsing: mutated.blocks[block].raw, layout: mutated.layout)
            else { return make(seed: seed, image: image, other: other, otherImage: otherImage, &random) }
            mutateRuns(&payload, &random)
            mutated.blocks[block].raw = payload.serialized()
            return ("runs", assemble(mutated, &random), nil)
        case 11:
            var mutated = image
            mutateBlocks(&mutated, otherImage, &random)
            return ("blocks", assemble(mutated, &random), nil)
        case 12:
            var mutated = image
            let block = random.below(mutated.blocks.count)
            if random.oneIn(2) {
                mutated.blocks[block].type = random.pick([0, 1, 2, 3, 4, 0xFF])
            } else {
                mutated.blocks[block].flags = random.pick([0, 1, 2, 3, 0x80, 0xFF])
            }
            if random.oneIn(2) { mutated.header[random.int(in: 8...9)] = random.pick([0, 1, 2, 0xFF]) }
            return ("block headers", assemble(mutated, &random), nil)
        default:
            let operations = OperationGenerator.operations(&random)
            let bytes = (try? FuzzCorpus.bundle(operations, publisher: operations.first?.id.replica ?? FuzzCorpus.alice)) ?? []
            return ("generated operations", bytes, operations)
        }
    }

    static func assemble(_ image: BundleImage, _ random: inout FuzzRandom) -> [UInt8] {
        let end: BundleImage.EndFix = random.oneIn(8) ? (random.oneIn(2) ? .checksumOnly : .none) : .rebuild
        let compression: BundleImage.Compression = random.oneIn(4) ? .rawFrame : .zstd(Int32(random.int(in: 1...3)))
        return image.assemble(compression: compression, end: end)
    }

    static func mutateRuns(_ payload: inout OperationsPayload, _ random: inout FuzzRandom) {
        let interestingSeqs: [UInt64] = [0, 1, 2, 1 << 32, UInt64(Int64.max) - 1, UInt64(Int64.max), 1 << 63, UInt64.max - 1, UInt64.max]
        for _ in 0..<random.int(in: 1...3) {
            guard !payload.runs.isEmpty else {
                payload.runs.append(.init(author: 0, firstSeq: 1, count: 1, bytes: random.bytes(random.smallCount(max: 40))))
                continue
            }
            let index = random.below(payload.runs.count)
            let count = payload.runs[index].count
            switch random.below(10) {
            case 0: payload.runs[index].author = random.pick([0, 1, 2, UInt64(payload.replicas.count), 1 << 32, UInt64.max])
            case 1:
                let first = payload.runs[index].firstSeq
                payload.runs[index].firstSeq = random.oneIn(2) ? random.pick(interestingSeqs) : random.pick([first &+ 1, first &- 1, UInt64.max &- count &+ 1, UInt64.max &- count &+ 2])
            case 2: payload.runs[index].count = random.pick([0, 1, count &+ 1, count &- 1, UInt64(payload.runs[index].bytes.count), 1 << 32, UInt64.max])
            case 3:
                let length = UInt64(payload.runs[index].bytes.count)
                payload.runs[index].lengthOverride = random.pick([0, length &- 1, length + 1, length + 16, 1 << 32, UInt64.max])
            case 4, 5, 6 where payload.layout == .columns: ByteMutations.mutate(&payload.trailing, &random)
            case 4, 5, 6: ByteMutations.mutate(&payload.runs[index].bytes, &random, other: random.pick(payload.runs).bytes)
            case 7:
                // A run twice, or a run dropped, or two swapped.
                switch random.below(3) {
                case 0: payload.runs.insert(payload.runs[index], at: random.below(payload.runs.count + 1))
                case 1: payload.runs.remove(at: index)
                default: payload.runs.swapAt(index, random.below(payload.runs.count))
                }
            case 8:
                // The replica table: an id changed, duplicated, dropped or added.
                switch random.below(4) {
                case 0 where !payload.replicas.isEmpty: payload.replicas[random.below(payload.replicas.count)][random.below(16)] ^= 1 << random.below(8)
                case 1 where !payload.replicas.isEmpty: payload.replicas.append(random.pick(payload.replicas))
                case 2 where !payload.replicas.isEmpty: payload.replicas.removeLast()
                default: payload.replicas.append(random.bytes(16))
                }
            default: payload.trailing += random.bytes(random.smallCount(max: 8))
            }
        }
    }

    static func mutateBlocks(_ image: inout BundleImage, _ other: BundleImage, _ random: inout FuzzRandom) {
        guard !image.blocks.isEmpty else { return }
        let index = random.below(image.blocks.count)
        switch random.below(5) {
        case 0: image.blocks.insert(image.blocks[index], at: random.below(image.blocks.count + 1))
        case 1: image.blocks.remove(at: index)
        case 2: image.blocks.swapAt(index, random.below(image.blocks.count))
        case 3:
            // Another seed's operations blocks (their end block is rebuilt to match).
            let foreign = other.blocks.filter { $0.type == 2 }
            if let block = foreign.randomElement(using: &random) { image.blocks.insert(block, at: max(1, min(index, image.blocks.count - 1))) }
        default:
            // Another seed's manifest.
            if let manifest = other.blocks.first(where: { $0.type == 1 }), let at = image.blocks.firstIndex(where: { $0.type == 1 }) {
                image.blocks[at] = manifest
            }
        }
    }
}

/// Operations made up at random with edge values, valid and not: strings of every kind, kinds
/// known and unknown, known fields with values of the wrong type, instants and timestamps at and
/// past their limits, seqs 0 and near 2^63 and 2^64, removes naming dots that never existed.
enum OperationGenerator {
    /// Half the time only valid operations (`clean`), so that many reach the store.
    static func operations(_ random: inout FuzzRandom) -> [Op] {
        let clean = random.oneIn(2)
        let replicas = [FuzzCorpus.alice, FuzzCorpus.bob, FuzzCorpus.carol, ReplicaID(high: random.next(), low: random.next())]
        var records = [FuzzCorpus.reminder, FuzzCorpus.note, FuzzCorpus.alien]
        records.append(RecordRef(kind: RecordKind(rawValue: UInt8(random.int(in: 1...255))), id: RecordID(high: random.next(), low: random.next())))
        var operations: [Op] = []
        for author in replicas.prefix(random.int(in: 1...3)) {
            let firstSeq: UInt64 = random.oneIn(2) ? 1
                : clean ? random.pick([2, 50, 1 << 32, Op.maxSeq - 20]) : random.pick([0, 2, 50, 1 << 32, Op.maxSeq - 3, Op.maxSeq, 1 << 63, UInt64.max - 3])
            var timestamp = random.oneIn(3)
                ? (clean ? random.pick([0, 1, (Timestamp.maxPhysicalMillis << 16) - (1 << 30)])
                    : random.pick([0, (Timestamp.maxPhysicalMillis << 16) - 2, (Timestamp.maxPhysicalMillis << 16) | 0xFFF0, (Timestamp.maxPhysicalMillis + 1) << 16, UInt64.max - 5]))
                : (FuzzCorpus.millis + UInt64(random.below(1000))) << 16
            for offset in 0..<UInt64(random.smallCount(max: 12)) {
                let (seq, overflow) = firstSeq.addingReportingOverflow(offset)
                if overflow { break }
                let record = random.pick(records)
                operations.append(Op(
                    id: OperationID(replica: author, seq: seq), timestamp: Timestamp(rawValue: timestamp),
                    record: record, action: action(for: record, replicas: replicas, clean: clean, &random)))
                timestamp &+= UInt64(random.pick(clean ? [0, 1, 1, 1 << 16] : [0, 1, 1, 1 << 16, 1 << 40]))
            }
        }
        if random.oneIn(3) { operations.shuffle(using: &random) }
        return operations
    }

    static func action(for record: RecordRef, replicas: [ReplicaID], clean: Bool, _ random: inout FuzzRandom) -> Action {
        switch random.below(10) {
        case 0, 1:
            return .addTag(ExactString(EdgeStrings.random(&random)))
        case 2:
            let dots = (0..<random.smallCount(max: 20)).map { _ in
                OperationID(replica: random.pick(replicas), seq: random.pick([0, 1, 2, 3, 1 << 63, UInt64.max, random.next()]))
            }
            return .removeTag(ExactString(EdgeStrings.random(&random)), observed: random.oneIn(4) ? [] : dots)
        case 3:
            // A field by name: unknown names mostly, sometimes empty or a known field's name (invalid).
            var name = random.oneIn(6) ? random.pick(["", "title", "repeat", "deleted"]) : EdgeStrings.random(&random)
            if clean, name.isEmpty || Field(name: name).code != 0 { name = "x-" + name }
            return .assign(.other(ExactString(name)), value(&random))
        default:
            let field = Field(code: UInt8(random.int(in: 1...10)))!
            guard clean || !random.oneIn(8) else { return .assign(field, value(&random)) }  // any type, often the wrong one
            switch field {
            case .title, .body: return .assign(field, .string(EdgeStrings.random(&random)))
            case .notes, .repeatRule: return .assign(field, random.oneIn(4) ? .null : .string(EdgeStrings.random(&random)))
            case .due, .completed, .snoozedUntil:
                let instants: [Int64] = [Field.instantRange.lowerBound, Field.instantRange.upperBound, 0, -1, 1_795_000_000_000]
                let edges: [Int64] = [Field.instantRange.lowerBound - 1, Field.instantRange.upperBound + 1, .min, .max]
                return .assign(field, random.oneIn(4) ? .null : .int(!clean && random.oneIn(8) ? random.pick(edges) : random.pick(instants)))
            case .priority: return .assign(field, .int(random.pick([0, 1, 2, 3, 4, -1, .max, .min])))
            default: return .assign(field, .bool(random.oneIn(2)))
            }
        }
    }

    static func value(_ random: inout FuzzRandom) -> Value {
        switch random.below(5) {
        case 0: .null
        case 1: .bool(random.oneIn(2))
        case 2: .int(random.oneIn(2) ? Int64(bitPattern: random.next()) : random.pick([0, 1, -1, .max, .min]))
        default: .string(EdgeStrings.random(&random))
        }
    }
}

// MARK: Checking

/// The properties every input must have.
struct BundleChecker {
    let run: FuzzRun
    let merger: FuzzMerger

    mutating func check(_ input: [UInt8], index: Int, expected: [Op]?, merge: Bool, _ random: inout FuzzRandom) {
        let started = Date()
        let (outcome, largest) = ReadOutcome.read(input)
        let elapsed = Date().timeIntervalSince(started)
        run.count(outcome.label)
        if let expected { run.count(expected.allSatisfy { (try? $0.validate()) != nil } ? "generated valid" : "generated invalid") }
        var problems: [String] = []
        if elapsed > run.settings.slowSeconds { problems.append("reading took \(elapsed) s") }
        if largest > BundleFormat.maxBlockBytes { problems.append("the reader asked its source for \(largest) bytes at once") }
        switch outcome {
        case .unexpected(let what):
            problems.append("an error that is not a BundleError: \(what)")
        case .refused(let error):
            if error.description.isEmpty || error.description.contains("\n") {
                problems.append("an error that is not one line: \(String(reflecting: error.description))")
            }
            if let expected, expected.allSatisfy({ (try? $0.validate()) != nil }) {
                problems.append("generated valid operations were refused: \(error)")
            }
        case let .decoded(manifest, operations, summary):
            problems += Self.problems(decoded: manifest, operations, summary, input: input)
            if let expected {
                if let invalid = expected.indices.first(where: { (try? expected[$0].validate()) == nil }) {
                    var reason = ""
                    do { try expected[invalid].validate() } catch { reason = error.description }
                    let read = invalid < operations.count ? operations[invalid].description : "nothing"
                    problems.append("a generated invalid operation was read: \(reason); read as \(read)")
                } else if let index = expected.indices.first(where: { $0 >= operations.count || operations[$0] != expected[$0] }) {
                    problems.append("generated operation \(expected[index]) read back as \(index < operations.count ? operations[index].description : "nothing")")
                }
            }
        }
        // Read in small pieces, the same bytes give the same outcome.
        if random.oneIn(4) {
            let chunk = random.oneIn(2) ? 1 : random.int(in: 2...7)
            let (again, _) = ReadOutcome.read(input, chunk: chunk)
            if again != outcome { problems.append("read \(chunk) bytes at a time: \(again.label), whole: \(outcome.label)") }
        }
        if !problems.isEmpty {
            run.finding(index, problems.joined(separator: "; "), input: input)
            return
        }
        if merge { merger.merge(input, outcome: outcome, index: index) }
    }

    static func problems(decoded manifest: BundleManifest, _ operations: [Op], _ summary: BundleSummary, input: [UInt8]) -> [String] {
        var problems: [String] = []
        if summary.bytes != input.count { problems.append("the summary counts \(summary.bytes) bytes of \(input.count)") }
        if summary.operations != operations.count { problems.append("the summary counts \(summary.operations) operations, \(operations.count) were read") }
        if summary.manifest != manifest { problems.append("the summary's manifest differs") }
        for operation in operations {
            do { try operation.validate() } catch { problems.append("read an invalid operation: \(error)") }
        }
        // Writing what was read and reading it again gives the same manifest and operations.
        do {
            var bytes: [UInt8] = []
            var writer = try BundleWriter(manifest: manifest) { bytes += $0 }
            for operation in operations { try writer.append(operation) }
            _ = try writer.finish()
            let (again, _) = ReadOutcome.read(bytes)
            guard case let .decoded(manifestAgain, operationsAgain, _) = again, manifestAgain == manifest, operationsAgain == operations else {
                problems.append("what was read does not survive writing and reading again: \(again.label)")
                return problems
            }
        } catch {
            problems.append("what was read cannot be written: \(error)")
        }
        return problems
    }
}

/// Merges inputs into a real store (a file in a temporary directory) with `mergeBundle(at:)`,
/// checking that a refused bundle changes nothing and a merged one leaves the store sound and
/// holding exactly what was read.
final class FuzzMerger {
    private let run: FuzzRun
    private let directory: TemporaryDirectory
    private var store: ConcordStore
    private var generation = 0
    private var before: StoreSnapshot
    private var held: [OperationID: Op]

    struct StoreSnapshot: Equatable {
        var dump: String
        var versionVector: VersionVector
        var operations: Int
        var clock: Timestamp
    }

    init(_ run: FuzzRun) throws {
        self.run = run
        directory = try TemporaryDirectory()
        (store, before, held) = try Self.freshStore(in: directory, generation: 0)
    }

    private static func freshStore(in directory: TemporaryDirectory, generation: Int) throws -> (ConcordStore, StoreSnapshot, [OperationID: Op]) {
        let clock = ManualClock(baseMillis)
        let store = try ConcordStore.create(at: directory.file("target-\(generation).db"), environment: environment(clock: clock, seed: 77))
        // A state of its own, for merges to change or leave alone.
        let id = try store.addReminder(ReminderDraft(title: "the target's own", notes: "n", tags: ["x"]))
        try store.addNote(NoteDraft(title: "a note", body: "b", tags: ["x", "y"]))
        try store.tag(.reminder(id), add: ["z"], remove: ["x"])
        return (store, try snapshot(store), Dictionary(uniqueKeysWithValues: try store.allOperations().map { ($0.id, $0) }))
    }

    private static func snapshot(_ store: ConcordStore) throws -> StoreSnapshot {
        let status = try store.status()
        return StoreSnapshot(dump: try store.dump(), versionVector: status.versionVector, operations: status.operations, clock: status.clock)
    }

    private func reset() {
        try? store.close()
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: directory.file("target-\(generation).db") + suffix) }
        generation += 1
        do {
            (store, before, held) = try Self.freshStore(in: directory, generation: generation)
        } catch {
            fatalError("cannot make a fresh target store: \(error)")
        }
    }

    /// An operation's bytes (§8.3), which is what "the same operation" means.
    static func encoded(_ operation: Op) -> [UInt8] {
        var writer = ByteWriter()
        var encoder = OperationCodec.RunEncoder()
        encoder.append(operation, into: &writer)
        return writer.bytes
    }

    func merge(_ input: [UInt8], outcome: ReadOutcome, index: Int) {
        let path = directory.file("input.cbundle")
        do {
            try writeBytes(input, to: path)
        } catch {
            run.finding(index, "cannot write the input: \(error)", input: input)
            return
        }
        var problems: [String] = []
        defer {
            if !problems.isEmpty {
                run.finding(index, "merge: " + problems.joined(separator: "; "), input: input)
                reset()
            }
        }
        let merged: (MergeReport, BundleSummary)
        do {
            merged = try store.mergeBundle(at: path)
        } catch {
            run.count("merge refused")
            if let error = error as? ConcordError, error.code == .clash, case let .decoded(_, operations, _) = outcome {
                // Two different operations under one id (SPEC.md §4.2, §9.1): the bundle holds
                // both, or one differs from the operation the store holds. Refused, as it must be.
                var seen = held
                let clashes = operations.contains { operation in
                    defer { if seen[operation.id] == nil { seen[operation.id] = operation } }
                    return seen[operation.id].map { Self.encoded($0) != Self.encoded(operation) } ?? false
                }
                if clashes { run.count("clash refused") } else { problems.append("a clash was reported where there is none: \(error)") }
            } else if case .decoded = outcome {
                problems.append("a bundle the reader reads was refused: \(type(of: error)) \(error)")
            }
            if let error = error as? ConcordError, error.code == .clash {
                // Not an ConcordError: the store refused what the bundle holds, not its bytes.
            } else if let error = error as? ConcordError {
                // A mutation that made the magic an encrypted bundle's is refused as one (§13.1).
                let sealed = input.starts(with: EncryptedBundleFormat.magic) && error.code == .encryptedBundle
                if error.code != .invalidInput, !sealed { problems.append("error code \(error.code), not invalidInput: \(error)") }
                if !error.message.hasPrefix(path + ": ") || error.message.contains("\n") { problems.append("the message is not one line naming the file: \(String(reflecting: error.message))") }
            } else {
                problems.append("an error that is not an ConcordError: \(type(of: error)) \(error)")
            }
            do {
                let after = try Self.snapshot(store)
                if after != before { problems.append("the refused merge changed the store") }
            } catch {
                problems.append("the store cannot be read after a refused merge: \(error)")
            }
            return
        }
        run.count("merged")
        guard case let .decoded(_, operations, summary) = outcome else {
            problems.append("a bundle the reader refuses (\(outcome.label)) was merged")
            return
        }
        let (report, mergedSummary) = merged
        var fromMemory = mergedSummary
        fromMemory.sha256 = nil  // of the file: the reader read from memory
        if fromMemory != summary { problems.append("the merge's summary differs from the reader's") }
        // The first copy of each operation not held before is new; every other one a duplicate.
        var new: [OperationID: Op] = [:]
        for operation in operations where held[operation.id] == nil && new[operation.id] == nil { new[operation.id] = operation }
        if report.newOperationCount != new.count || report.duplicates != operations.count - new.count {
            problems.append("the merge reports \(report.newOperationCount) new and \(report.duplicates) duplicates, expected \(new.count) and \(operations.count - new.count)")
        }
        do {
            let verified = try store.verify()
            if !verified.isSound {
                problems.append("the merged store does not verify: \(verified.problems.prefix(5))")
                return
            }
            var nowHeld: [OperationID: Op] = [:]
            for operation in try store.allOperations() { nowHeld[operation.id] = operation }
            for (id, operation) in new where nowHeld[id] != operation {
                problems.append("operation \(id) is held as \(String(describing: nowHeld[id])), merged as \(operation)")
                break
            }
            for (id, operation) in held where nowHeld[id] != operation {
                problems.append("operation \(id), held before, changed")
                break
            }
            if nowHeld.count != held.count + new.count { problems.append("the store holds \(nowHeld.count) operations, expected \(held.count + new.count)") }
            held = nowHeld
            before = try Self.snapshot(store)
        } catch {
            problems.append("the store cannot be read after a merge: \(error)")
        }
        // Keep the target small, so that each check stays quick.
        if held.count > 3000 { reset() }
    }
}
