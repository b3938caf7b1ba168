import Foundation
import StepCore
import StepLogging
import StepTestSupport
import Testing

@testable import StepAPI

@Suite("JSON reader for request bodies")
struct JSONReaderTests {
    static func foundation(_ text: [UInt8]) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(text))
    }

    static let cases: [String] = [
        #"{"day":"2026-05-18","count":8421,"gyroSamplesObserved":true,"deviceModel":null}"#,
        #"  {"a" : [1, -2, 3.5, -0.25e2, 1E3, 2.0, -0, 0, 12345678901234567890]}  "#,
        #"{"s":"tab\there \"quoted\" back\\slash \/ \u00e9 \ud83d\udeb6 \u0001"}"#,
        #"{"nested":{"deeper":{"deepest":[[],{}]}}}"#,
        #"[true,false,null]"#, #""bare string""#, "42", "-7", "1.5", "9223372036854775807", "-9223372036854775808",
        "9223372036854775808", "zażółć", #"{"k":"zażółć 🚶"}"#,
        // Refused by both.
        "", " ", "{", "}", "{'a':1}", "01", "-", "1.", ".5", "1e", "+1", "nul", "tru",
        "NaN", "Infinity", "1e400", #"{"a":1} x"#, #""unterminated"#, "\"ctrl\u{01}char\"", #""\x""#,
        #""\ud800""#, #""\udc00""#, #""\ud800\u0041""#, #""\u12""#, "[1 2]", #"{"a" 1}"#, "[", "[[]", #"{"a":}"#,
    ]

    @Test("measures the elements of the top-level object's named array as the body spells them, and nothing else")
    func elementSizes() throws {
        let text = #"{"a":[1, "xy"], "buckets" : [ 1 , "\u00e9é" ,{"buckets":[12345]},[ ] ] , "z":{"buckets":[1]}}"#
        let read = try #require(JSONReader.read(Array(text.utf8), elementSizesOf: "buckets"))
        #expect(read.elementSizes == [1, 10, 19, 3])
        #expect(read.value == JSONReader.read(Array(text.utf8)))
        #expect(JSONReader.read(Array(#"{"buckets":{"a":1}}"#.utf8), elementSizesOf: "buckets")?.elementSizes == [])
        #expect(JSONReader.read(Array(#"[{"buckets":[1]}]"#.utf8), elementSizesOf: "buckets")?.elementSizes == [])
        #expect(JSONReader.read(Array(#"{"buckets":[1,]}"#.utf8), elementSizesOf: "buckets") == nil)
    }

    @Test("reads exactly what JSONDecoder reads into JSONValue, and refuses what it refuses, and more")
    func agreesWithFoundation() {
        for text in Self.cases {
            let bytes = Array(text.utf8)
            #expect(JSONReader.read(bytes) == Self.foundation(bytes), "\(text)")
        }
        // Trailing commas: JSONDecoder lets them through; RFC 8259 (and this reader) does not.
        for text in ["[1,]", #"{"a":1,}"#, #"{"a":[1,2,],"b":2}"#] {
            #expect(JSONReader.read(Array(text.utf8)) == nil, "\(text)")
        }
        // A repeated key: JSONDecoder keeps the first value, other readers the last; this reader refuses it.
        for text in [#"{"dup":1,"dup":2}"#, #"{"a":{"b":1,"b":1}}"#, #"[{"count":100,"count":49000}]"#] {
            #expect(JSONReader.read(Array(text.utf8)) == nil, "\(text)")
        }
        #expect(
            JSONReader.read(Array(#"{"a":{"b":1},"b":{"a":2}}"#.utf8)) != nil, "the same key in two objects is fine")
        // U+0000: JSONDecoder takes it; no value of this service may hold it (PostgreSQL cannot store it in text).
        for text in [#""\u0000""#, #"{"s":"a\u0000b"}"#, #"["\u0000"]"#] {
            #expect(JSONReader.read(Array(text.utf8)) == nil && Self.foundation(Array(text.utf8)) != nil, "\(text)")
        }
        // Invalid UTF-8 inside a string.
        let broken: [UInt8] = [0x22, 0xC3, 0x28, 0x22]
        #expect(JSONReader.read(broken) == nil && Self.foundation(broken) == nil)
    }

    @Test(
        "a number with a fraction or an exponent is an integer only when its digits make one, not when the nearest double is"
    )
    func wholeNumbers() {
        let whole: [(String, Int)] = [
            ("1.0", 1), ("1e3", 1_000), ("1E+3", 1_000), ("-0.25e2", -25), ("-0.0", 0), ("0e999999", 0),
            ("0.000e-5", 0), ("12.3400e2", 1_234), ("5e-0", 5), ("9.223372036854775807e18", .max),
            ("-9.223372036854775808e18", .min), ("100e-2", 1),
        ]
        for (text, value) in whole {
            #expect(JSONReader.read(Array(text.utf8)) == .int(value), "\(text)")
        }
        // Long runs of zeros before and after the point.
        let zeros = String(repeating: "0", count: 200_000)
        #expect(JSONReader.read(Array("0.\(zeros)1".utf8)) == .double(0))
        #expect(JSONReader.read(Array("1\(zeros.prefix(18)).\(zeros)e-18".utf8)) == .int(1))
        // Doubles that round to a whole number, and whole numbers past Int's range: not integers.
        for text in [
            "50000.000000000001", "1e-400", "8500.0000000000001", "12.345e1", "9.223372036854775808e18", "1e19",
        ] {
            guard case .double? = JSONReader.read(Array(text.utf8)) else {
                Issue.record("\(text) read as \(String(describing: JSONReader.read(Array(text.utf8))))")
                continue
            }
        }
    }

    @Test("nesting beyond the depth limit is refused, not followed")
    func depth() {
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        #expect(JSONReader.read(Array(deep.utf8)) == nil)
        let fine = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(JSONReader.read(Array(fine.utf8)) != nil)
    }

    @Test("random documents and their one-byte mutations read the same as JSONDecoder", arguments: 0..<4)
    func randomDocuments(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        for _ in 0..<250 {
            let document = Self.render(Self.randomValue(&random, depth: 0), &random)
            let bytes = Array(document.utf8)
            let expected = Self.foundation(bytes)
            #expect(expected != nil, "generator made invalid JSON: \(document)")
            #expect(JSONReader.read(bytes) == expected, "\(document)")
            var mutated = bytes
            let position = Int(random.next() % UInt64(mutated.count))
            switch random.next() % 3 {
            case 0: mutated.remove(at: position)
            case 1: mutated.insert(Self.noise[Int(random.next() % UInt64(Self.noise.count))], at: position)
            default: mutated[position] = Self.noise[Int(random.next() % UInt64(Self.noise.count))]
            }
            let text = String(decoding: mutated, as: UTF8.self)
            if Self.hasTrailingComma(mutated) || Self.hasRepeatedKey(mutated) || Self.hasEscapedNUL(mutated) {
                // JSONDecoder lets a trailing comma, a repeated key or an escaped NUL through; the reader refuses
                // them (checked above). A one-byte mutation can make two keys of an object equal ("ab" and "a"),
                // or an escape `\u0000`.
                #expect(JSONReader.read(mutated) == nil, "\(text)")
            } else {
                #expect(JSONReader.read(mutated) == Self.foundation(mutated), "\(text)")
            }
        }
    }

    /// Whether the text holds the escape `\u0000`.
    static func hasEscapedNUL(_ bytes: [UInt8]) -> Bool {
        String(decoding: bytes, as: UTF8.self).contains("\\u0000")
    }

    /// A `,` followed, after whitespace, by `]` or `}` outside any string.
    static func hasTrailingComma(_ bytes: [UInt8]) -> Bool {
        var inString = false
        var escaped = false
        var pendingComma = false
        for byte in bytes {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true; pendingComma = false
            case UInt8(ascii: ","): pendingComma = true
            case UInt8(ascii: "]"), UInt8(ascii: "}"): if pendingComma { return true }
            case 0x20, 0x09, 0x0A, 0x0D: break
            default: pendingComma = false
            }
        }
        return false
    }

    /// Whether an object repeats a key (compared decoded, so `"a"` and `"\u0061"` are the same), in a document
    /// JSONDecoder reads; false for one it does not.
    static func hasRepeatedKey(_ bytes: [UInt8]) -> Bool {
        guard foundation(bytes) != nil else { return false }
        // One entry per open container: the keys seen so far for an object, nil for an array.
        var open: [Set<String>?] = []
        var expectingKey = false
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "{"):
                open.append([])
                expectingKey = true
            case UInt8(ascii: "["):
                open.append(nil)
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                _ = open.popLast()
                expectingKey = false
            case UInt8(ascii: ","):
                expectingKey = open.last.map { $0 != nil } ?? false
            case UInt8(ascii: "\""):
                var end = index + 1
                while bytes[end] != UInt8(ascii: "\"") { end += bytes[end] == UInt8(ascii: "\\") ? 2 : 1 }
                if expectingKey, case let keys?? = open.last,
                    let key = try? JSONDecoder().decode(String.self, from: Data(bytes[index...end]))
                {
                    if keys.contains(key) { return true }
                    open[open.count - 1] = keys.union([key])
                    expectingKey = false
                }
                index = end
            default:
                break
            }
            index += 1
        }
        return false
    }

    static let noise = Array("{}[]\",:\\ 0123456789-+.eEtrufalsn\u{01}x".utf8)

    static func randomValue(_ random: inout SplitMix64, depth: Int) -> JSONValue {
        switch random.next() % (depth > 3 ? 5 : 7) {
        case 0: return .null
        case 1: return .bool(random.next() % 2 == 0)
        case 2: return .int(Int(truncatingIfNeeded: random.next()) >> Int(random.next() % 60))
        case 3: return .double(Double(Int(truncatingIfNeeded: random.next()) % 1_000_000) / 64 + 0.5)
        case 4: return .string(randomString(&random))
        case 5: return .array((0..<Int(random.next() % 4)).map { _ in randomValue(&random, depth: depth + 1) })
        default:
            var object: [String: JSONValue] = [:]
            for _ in 0..<Int(random.next() % 5) {
                object[randomString(&random)] = randomValue(&random, depth: depth + 1)
            }
            return .object(object)
        }
    }

    static func randomString(_ random: inout SplitMix64) -> String {
        let alphabet: [Character] = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "é", "🚶", "ż", "\u{7F}", "\u{1}"]
        return String((0..<Int(random.next() % 8)).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
    }

    /// JSON text for `value`, with random whitespace and, for strings, a random mix of escapes.
    static func render(_ value: JSONValue, _ random: inout SplitMix64) -> String {
        let space = [" ", "", "\n", "\t", "  "][Int(random.next() % 5)]
        switch value {
        case .null: return "null"
        case .bool(let flag): return flag ? "true" : "false"
        case .int(let number): return String(number)
        case .double(let number): return "\(number)"
        case .string(let text): return quote(text, &random)
        case .array(let elements):
            return "[" + space + elements.map { render($0, &random) }.joined(separator: "," + space) + "]"
        case .object(let members):
            return "{"
                + members.sorted { $0.key < $1.key }.map {
                    quote($0.key, &random) + space + ":" + render($0.value, &random)
                }
                .joined(separator: "," + space) + space + "}"
        }
    }

    static func quote(_ text: String, _ random: inout SplitMix64) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20: result += String(format: "\\u%04x", scalar.value)
            case _ where random.next() % 4 == 0 && scalar.value < 0x10000:
                result += String(format: "\\u%04X", scalar.value)
            case _ where random.next() % 4 == 0 && scalar.value >= 0x10000:
                let value = scalar.value - 0x10000
                result += String(format: "\\u%04x\\u%04x", 0xD800 + (value >> 10), 0xDC00 + (value & 0x3FF))
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
