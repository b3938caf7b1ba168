import StepCore

/// A strict JSON parser (RFC 8259) for configuration files that keeps the line and column where each key and value
/// starts, so every error can name its place. It refuses what lenient parsers let through (a trailing comma, a
/// comment, a bare word) and keeps an object's members in order, duplicates included, for the caller to refuse.
struct StrictJSONParser {
    indirect enum Value {
        case object([Member])
        case array([Node])
        case string(String)
        case int(Int)
        case double(Double)
        case bool(Bool)
        case null
    }

    struct Node {
        var value: Value
        var position: TextPosition
    }

    struct Member {
        var key: String
        var keyPosition: TextPosition
        var node: Node
    }

    struct Failure: Error, Equatable {
        var reason: String
        var position: TextPosition
    }

    /// Deeper nesting than any configuration needs is refused rather than recursed into.
    static let maximumDepth = 64

    private let bytes: [UInt8]
    private var index = 0
    private var line = 1
    private var column = 1
    private var depth = 0

    private init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// The file's one top-level object.
    static func parseObject(_ bytes: [UInt8]) throws(Failure) -> [Member] {
        var parser = StrictJSONParser(bytes)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { parser.index = 3 }
        parser.skipWhitespace()
        guard parser.index < bytes.count else {
            throw Failure(reason: "the file is empty, expected a JSON object", position: parser.position)
        }
        let start = parser.position
        let node = try parser.value()
        parser.skipWhitespace()
        guard parser.index == bytes.count else {
            throw parser.failure("unexpected \(parser.describeCurrent()) after the configuration object")
        }
        guard case .object(let members) = node.value else {
            throw Failure(reason: "the configuration must be one JSON object ({ … })", position: start)
        }
        return members
    }

    private var position: TextPosition { TextPosition(line: line, column: column) }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private func failure(_ reason: String) -> Failure { Failure(reason: reason, position: position) }

    private mutating func advance() {
        let byte = bytes[index]
        index += 1
        if byte == UInt8(ascii: "\n") {
            line += 1
            column = 1
        } else if byte & 0xC0 != 0x80 {
            // Continuation bytes of a multi-byte character do not move the column again.
            column += 1
        }
    }

    private mutating func skipWhitespace() {
        while let byte = current,
            byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\n")
                || byte == UInt8(ascii: "\r")
        {
            advance()
        }
    }

    /// The character at the current position, for a message: `'}'`, `end of file`.
    private func describeCurrent() -> String {
        guard let byte = current else { return "end of file" }
        if byte >= 0x20, byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        if byte < 0x20 { return "control character U+\(String(byte, radix: 16, uppercase: true))" }
        var text = ""
        for length in (1...4).reversed() where index + length <= bytes.count {
            if let decoded = String(validating: bytes[index..<(index + length)], as: UTF8.self) {
                text = decoded
                break
            }
        }
        return text.isEmpty ? "a byte that is not UTF-8" : "'\(text)'"
    }

    private mutating func value() throws(Failure) -> Node {
        let start = position
        guard let byte = current else { throw failure("expected a value, found end of file") }
        switch byte {
        case UInt8(ascii: "{"): return Node(value: .object(try object()), position: start)
        case UInt8(ascii: "["): return Node(value: .array(try array()), position: start)
        case UInt8(ascii: "\""): return Node(value: .string(try string()), position: start)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return Node(value: try number(), position: start)
        case UInt8(ascii: "t"):
            try literal("true")
            return Node(value: .bool(true), position: start)
        case UInt8(ascii: "f"):
            try literal("false")
            return Node(value: .bool(false), position: start)
        case UInt8(ascii: "n"):
            try literal("null")
            return Node(value: .null, position: start)
        default: throw failure("expected a value, found \(describeCurrent())")
        }
    }

    private mutating func enter() throws(Failure) {
        depth += 1
        guard depth <= Self.maximumDepth else { throw failure("nested more than \(Self.maximumDepth) levels deep") }
    }

    /// An object or an array, from its opener to its closer: `element` reads one member or element and names what
    /// may follow it, for the error; the empty case, the commas and the closer are read here.
    private mutating func container<Element>(
        closedBy closer: UInt8, _ element: (inout Self) throws(Failure) -> (Element, expected: String)
    ) throws(Failure) -> [Element] {
        try enter()
        defer { depth -= 1 }
        advance()
        skipWhitespace()
        var elements: [Element] = []
        if current == closer {
            advance()
            return elements
        }
        while true {
            let (next, expected) = try element(&self)
            elements.append(next)
            guard try continues(before: closer, expected: expected) else { return elements }
        }
    }

    private mutating func object() throws(Failure) -> [Member] {
        try container(closedBy: UInt8(ascii: "}")) { parser throws(Failure) in try parser.member() }
    }

    /// `"key": value`, and what may follow it.
    private mutating func member() throws(Failure) -> (Member, expected: String) {
        guard current == UInt8(ascii: "\"") else {
            throw failure("expected a key in double quotes, found \(describeCurrent())")
        }
        let keyPosition = position
        let key = try string()
        skipWhitespace()
        guard current == UInt8(ascii: ":") else {
            throw failure("expected ':' after the key \"\(key)\", found \(describeCurrent())")
        }
        advance()
        skipWhitespace()
        let member = Member(key: key, keyPosition: keyPosition, node: try value())
        return (member, "',' or '}' after the value of \"\(key)\"")
    }

    private mutating func array() throws(Failure) -> [Node] {
        try container(closedBy: UInt8(ascii: "]")) { parser throws(Failure) in
            (try parser.value(), "',' or ']' in a list")
        }
    }

    /// After a member or an element: true when a ',' goes on to the next, false (past it) when `closer` ends the
    /// object or array. A ',' right before `closer` is refused; `expected` names what may follow, for the error.
    private mutating func continues(before closer: UInt8, expected: String) throws(Failure) -> Bool {
        skipWhitespace()
        if current == UInt8(ascii: ",") {
            let comma = position
            advance()
            skipWhitespace()
            if current == closer {
                throw Failure(reason: "trailing comma before '\(Character(Unicode.Scalar(closer)))'", position: comma)
            }
            return true
        }
        guard current == closer else { throw failure("expected \(expected), found \(describeCurrent())") }
        advance()
        return false
    }

    private mutating func string() throws(Failure) -> String {
        let start = position
        advance()
        var text: [UInt8] = []
        while true {
            guard let byte = current else { throw Failure(reason: "unterminated string", position: start) }
            switch byte {
            case UInt8(ascii: "\""):
                advance()
                guard let decoded = String(validating: text, as: UTF8.self) else {
                    throw Failure(reason: "a string that is not valid UTF-8", position: start)
                }
                return decoded
            case UInt8(ascii: "\\"):
                try escape(into: &text)
            case 0..<0x20:
                throw failure("a control character in a string (write it as an escape such as \\n)")
            default:
                text.append(byte)
                advance()
            }
        }
    }

    private mutating func escape(into text: inout [UInt8]) throws(Failure) {
        let start = position
        advance()
        guard let byte = current else { throw Failure(reason: "unterminated string", position: start) }
        advance()
        if let single = JSONEscape.single(byte) {
            text.append(single)
            return
        }
        guard byte == UInt8(ascii: "u") else {
            throw Failure(reason: "an invalid escape '\\\(Character(Unicode.Scalar(byte)))'", position: start)
        }
        let code = try hexQuad(start)
        let unicode: Unicode.Scalar?
        if JSONEscape.isHighSurrogate(code) {
            guard current == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u")
            else { throw Failure(reason: "a lone UTF-16 surrogate in \\u escape", position: start) }
            advance()
            advance()
            unicode = JSONEscape.scalar(high: code, low: try hexQuad(start))
        } else {
            unicode = Unicode.Scalar(code)
        }
        guard let unicode else { throw Failure(reason: "a lone UTF-16 surrogate in \\u escape", position: start) }
        text.append(contentsOf: Array(String(Character(unicode)).utf8))
    }

    private mutating func hexQuad(_ start: TextPosition) throws(Failure) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let byte = current, let digit = Self.hexDigit(byte) else {
                throw Failure(reason: "\\u must be followed by four hex digits", position: start)
            }
            value = value * 16 + digit
            advance()
        }
        return value
    }

    private static func hexDigit(_ byte: UInt8) -> UInt32? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }

    private mutating func number() throws(Failure) -> Value {
        let start = position
        let first = index
        var integral = true
        func isDigit(_ byte: UInt8?) -> Bool {
            byte.map { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") } ?? false
        }
        if current == UInt8(ascii: "-") { advance() }
        if current == UInt8(ascii: "0") {
            advance()
            if isDigit(current) { throw Failure(reason: "a number with a leading zero", position: start) }
        } else if isDigit(current) {
            while isDigit(current) { advance() }
        } else {
            throw Failure(reason: "a '-' that does not start a number", position: start)
        }
        if current == UInt8(ascii: ".") {
            integral = false
            advance()
            guard isDigit(current) else { throw failure("expected a digit after the decimal point") }
            while isDigit(current) { advance() }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            integral = false
            advance()
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { advance() }
            guard isDigit(current) else { throw failure("expected a digit in the exponent") }
            while isDigit(current) { advance() }
        }
        let lexeme = String(decoding: bytes[first..<index], as: UTF8.self)
        if integral, let value = Int(lexeme) { return .int(value) }
        guard let value = Double(lexeme), value.isFinite else {
            // The number itself is not repeated: an error may be logged, and a mistyped secret must not be.
            throw Failure(reason: "a number is out of range", position: start)
        }
        return .double(value)
    }

    private mutating func literal(_ word: String) throws(Failure) {
        let start = position
        let expected = Array(word.utf8)
        guard bytes.count - index >= expected.count, Array(bytes[index..<(index + expected.count)]) == expected else {
            // Only the first character, as every other error here: an unquoted word may be a secret written
            // without its quotes, and the error may reach a log (a configuration reload).
            let found = index < bytes.count ? String(decoding: bytes[index..<(index + 1)], as: UTF8.self) : ""
            throw Failure(reason: "expected a value, found '\(found)'", position: start)
        }
        for _ in expected { advance() }
    }
}
