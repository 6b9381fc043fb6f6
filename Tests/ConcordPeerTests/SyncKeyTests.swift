import ConcordCore
import ConcordKeys
import Foundation
import Testing

/// Sync keys and their text form (SPEC.md §15.1).
@Suite struct SyncKeyTests {
    /// Vectors computed from the SPEC by `Fixtures/peer-v1/vectors.py`, independently of this code.
    static let vectors: (strings: [String: String], versions: [String: [String: Int]]) = {
        let data = try! Data(contentsOf: fixturesDirectory.appendingPathComponent("peer-v1/vectors.json"))
        let object = try! JSONSerialization.jsonObject(with: data) as! [String: Any]
        return (object.compactMapValues { $0 as? String }, object.compactMapValues { $0 as? [String: Int] })
    }()

    static func vector(_ name: String) -> String { vectors.strings[name]! }

    @Test func textAndIDMatchTheVectors() throws {
        for (bytes, text, id) in [("key", "keyText", "keyID"), ("otherKey", "otherKeyText", "otherKeyID")] {
            let key = try #require(SyncKey(bytes: hex(Self.vector(bytes))))
            #expect(key.text == Self.vector(text))
            #expect(key.id == Self.vector(id))
            #expect(try SyncKey(text: Self.vector(text)) == key)
        }
    }

    @Test func generatedKeysRoundTripThroughText() throws {
        let random = seeded(42)
        var texts: Set<String> = []
        for _ in 0..<200 {
            let key = SyncKey.generate(using: random)
            let text = key.text
            #expect(text.hasPrefix("concord-key-1-"))
            #expect(text.count == 70)
            #expect(text.dropFirst(14).allSatisfy { "abcdefghijklmnopqrstuvwxyz234567".contains($0) })
            #expect(try SyncKey(text: text) == key)
            #expect(try SyncKey(text: text).bytes == key.bytes)
            #expect(key.id.count == 16 && key.id.allSatisfy(\.isHexDigit))
            texts.insert(text)
        }
        #expect(texts.count == 200)
    }

    @Test func theSystemGeneratorMakesDistinctKeys() {
        let first = SyncKey.generate()
        let second = SyncKey.generate()
        #expect(first != second)
        #expect(first.id != second.id)
    }

    @Test func aKeyNeverShowsItsSecretWhenPrinted() {
        let key = SyncKey.generate(using: seeded(3))
        let body = String(key.text.dropFirst(14))
        for shown in [key.description, key.debugDescription, "\(key)", String(describing: key), String(reflecting: key)] {
            #expect(!shown.contains(body.prefix(12)))
            #expect(shown.contains(key.id))
        }
    }

    @Test func equalityIsByBytes() throws {
        let key = SyncKey.generate(using: seeded(4))
        #expect(SyncKey(bytes: key.bytes) == key)
        var other = key.bytes
        other[31] ^= 1
        #expect(SyncKey(bytes: other) != key)
        #expect(SyncKey(bytes: [UInt8](repeating: 0, count: 31)) == nil)
        #expect(SyncKey(bytes: [UInt8](repeating: 0, count: 33)) == nil)
    }

    /// Spaces, dashes, line breaks, upper case and typographic dashes are all accepted.
    @Test func parsingIsTolerant() throws {
        let key = SyncKey.generate(using: seeded(5))
        let text = key.text
        let body = String(text.dropFirst(14))
        let grouped = stride(from: 0, to: 56, by: 4).map { offset in
            String(body.dropFirst(offset).prefix(4))
        }
        let spaced: String = grouped.joined(separator: " ")
        let firstLine: String = grouped[0..<7].joined()
        let secondLine: String = grouped[7...].joined()
        var variants: [String] = [text.uppercased(), "  " + text + "\n"]
        variants.append("concord-key-1-" + grouped.joined(separator: "-"))
        variants.append("concord-key-1-" + spaced)
        variants.append("CONCORD KEY 1 " + spaced.uppercased())
        variants.append("concord-key-1-\n" + firstLine + "\n" + secondLine + "\n")
        variants.append("concord\u{2013}key\u{2014}1\u{2010}" + body)
        variants.append("concordkey1" + body)
        variants.append("\tconcord-key-1-" + String(body.prefix(28)) + "\t" + String(body.dropFirst(28)))
        for variant in variants {
            #expect(try SyncKey(text: variant) == key, "\(variant)")
        }
    }

    @Test(arguments: [
        ("", ConcordError.Code.wrongPrefix, "a sync key starts with 'concord-key-1-'"),
        ("hello", .wrongPrefix, "a sync key starts with 'concord-key-1-'"),
        ("concord-kee-1-aaaa", .wrongPrefix, "a sync key starts with 'concord-key-1-'"),
        ("key-1-aaaqeayeaudaocajbifqydiob4ibceqtcqkrmfyydenbwha5dypwgdon", .wrongPrefix, "a sync key starts with 'concord-key-1-'"),
        ("concord-key-x-aaaa", .wrongPrefix, "a sync key starts with 'concord-key-1-'"),
        ("concord-key-", .wrongLength, "the sync key is cut short: nothing follows 'concord-key-1-'"),
    ])
    func aWrongPrefixIsRefused(text: String, code: ConcordError.Code, message: String) {
        #expect(throws: ConcordError(code, message)) { try SyncKey(text: text) }
    }

    @Test func aKeyOfAnotherFormatIsRefusedAsSuch() {
        let body = String(SyncKey.generate(using: seeded(6)).text.dropFirst(14))
        let error = #expect(throws: ConcordError.self) { try SyncKey(text: "concord-key-2-" + body) }
        #expect(error?.code == .unsupportedFormat)
        #expect(error?.message == "the sync key is of format 2, and this build reads format 1; upgrade Concord")
    }

    @Test(arguments: [
        ("0", 5, "'0' at character 5 after 'concord-key-1-' (the letter o?)"),
        ("1", 1, "'1' at character 1 after 'concord-key-1-' (the letter l or i?)"),
        ("8", 56, "'8' at character 56 after 'concord-key-1-' (the letter b?)"),
        ("!", 30, "'!' at character 30 after 'concord-key-1-';"),
        ("é", 2, "U+E9 at character 2 after 'concord-key-1-';"),
    ])
    func aCharacterOutsideTheAlphabetIsNamed(character: String, position: Int, expected: String) {
        var body = Array(SyncKey.generate(using: seeded(7)).text.dropFirst(14))
        body[position - 1] = Character(character)
        let error = #expect(throws: ConcordError.self) { try SyncKey(text: "concord-key-1-" + String(body)) }
        #expect(error?.code == .badCharacter)
        #expect(error?.message.contains(expected) == true, "\(error?.message ?? "")")
        #expect(error?.message.hasSuffix("a key holds only the letters a to z and the digits 2 to 7") == true)
    }

    @Test func aKeyWithACharacterMissingOrRepeatedIsRefused() {
        let text = SyncKey.generate(using: seeded(8)).text
        for (variant, count) in [(String(text.dropLast()), 55), (text + "a", 57), (String(text.prefix(40)), 26), ("concord-key-1-", 0)] {
            let error = #expect(throws: ConcordError.self) { try SyncKey(text: variant) }
            #expect(error?.code == .wrongLength)
            #expect(error?.message == "the sync key has \(count) characters after 'concord-key-1-', not 56; part of it is missing or repeated")
        }
    }

    /// Every change of one character to another valid one is caught by the checksum.
    @Test func everySingleCharacterTypoIsCaught() {
        let text = SyncKey.generate(using: seeded(9)).text
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567")
        var body = Array(text.dropFirst(14))
        var refused = 0
        for position in body.indices {
            let original = body[position]
            for replacement in alphabet where replacement != original {
                body[position] = replacement
                do {
                    _ = try SyncKey(text: "concord-key-1-" + String(body))
                    Issue.record("a typo at \(position) (\(original) → \(replacement)) was not caught")
                } catch {
                    #expect(error.code == .checksumMismatch)
                    #expect(error.message == "the sync key has a typo: its checksum does not match")
                    refused += 1
                }
            }
            body[position] = original
        }
        #expect(refused == 56 * 31)
    }

    @Test func twoSwappedCharactersAreCaught() {
        let text = SyncKey.generate(using: seeded(10)).text
        var body = Array(text.dropFirst(14))
        for position in 0..<55 where body[position] != body[position + 1] {
            body.swapAt(position, position + 1)
            #expect(throws: ConcordError.self) { try SyncKey(text: "concord-key-1-" + String(body)) }
            body.swapAt(position, position + 1)
        }
    }

    @Test func derivedKeysDependOnTheirInfoAndSalt() {
        let key = SyncKey.generate(using: seeded(11))
        let a = key.derivedKey(info: Array("a".utf8))
        let b = key.derivedKey(info: Array("b".utf8))
        let salted = key.derivedKey(info: Array("a".utf8), salt: [1, 2, 3])
        #expect(a != b)
        #expect(a != salted)
        #expect(a == key.derivedKey(info: Array("a".utf8)))
        #expect(key.derivedKey(info: Array("a".utf8), byteCount: 16).bitCount == 128)
    }

    @Test func randomBytesGiveTheCountAskedFor() {
        #expect(RandomBytes.system(32).count == 32)
        #expect(RandomBytes.system(0).isEmpty)
        #expect(RandomBytes.system(32) != RandomBytes.system(32))
    }
}
