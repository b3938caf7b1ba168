/// A strict JSON reader (RFC 8259) that builds a `JSONValue` straight from the body's bytes: no `Data` copy,
/// no `Decoder` containers. Numbers read as `JSONDecoder` would read them into `JSONValue`: an integral value
/// that fits `Int` is `.int` (so `2.0` and `2e3` are integers), anything else `.double`. Strings must be
/// valid UTF-8; unpaired surrogate escapes, control characters and trailing bytes are refused, and so are
/// trailing commas (which `JSONDecoder` lets through, but RFC 8259 does not). A repeated key in an object is refused (RFC 8259 leaves its meaning open). Nesting deeper than `maximumDepth` is refused rather than followed.
package enum JSONReader {
    package static let maximumDepth = 512

    /// The value `bytes` holds, or nil when they are not exactly one JSON value (whitespace around it allowed).
    package static func read(_ bytes: some Collection<UInt8>) -> JSONValue? {
        if let value = bytes.withContiguousStorageIfAvailable({ read(buffer: UnsafeRawBufferPointer($0)) }) {
            return value
        }
        return Array(bytes).withUnsafeBytes { read(buffer: $0) }
    }

    /// As `read`, and the size in bytes of each element of the array that the top-level object's member `member`
    /// holds, as the body spells it (from its first byte to its last, without the whitespace around it); empty
    /// when there is no such array.
    package static func read(_ bytes: some Collection<UInt8>, elementSizesOf member: String) -> (
        value: JSONValue, elementSizes: [Int]
    )? {
        if let read = bytes.withContiguousStorageIfAvailable({
            read(buffer: UnsafeRawBufferPointer($0), sizing: member)
        }) {
            return read
        }
        return Array(bytes).withUnsafeBytes { read(buffer: $0, sizing: member) }
    }

    private static func read(buffer: UnsafeRawBufferPointer, sizing member: String? = nil) -> (
        value: JSONValue, elementSizes: [Int]
    )? {
        var cursor = JSONCursor(bytes: buffer)
        cursor.sizedMember = member
        do {
            cursor.skipWhitespace()
            let value = try cursor.value(depth: 0)
            cursor.skipWhitespace()
            return cursor.atEnd ? (value, cursor.elementSizes) : nil
        } catch {
            return nil
        }
    }

    private static func read(buffer: UnsafeRawBufferPointer) -> JSONValue? {
        read(buffer: buffer, sizing: nil)?.value
    }
}

private struct JSONSyntaxError: Error {}

private struct JSONCursor {
    let bytes: UnsafeRawBufferPointer
    var index = 0
    /// The top-level object's member whose array elements are measured into `elementSizes`.
    var sizedMember: String?
    var elementSizes: [Int] = []

    var atEnd: Bool { index >= bytes.count }

    private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func expect(_ byte: UInt8) throws(JSONSyntaxError) {
        guard peek() == byte else { throw JSONSyntaxError() }
        index += 1
    }

    mutating func value(depth: Int) throws(JSONSyntaxError) -> JSONValue {
        guard let byte = peek() else { throw JSONSyntaxError() }
        switch byte {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw JSONSyntaxError()
        }
    }

    private mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count else { throw JSONSyntaxError() }
        let text = word.utf8Start
        for offset in 0..<count where bytes[index + offset] != text[offset] { throw JSONSyntaxError() }
        index += count
    }

    private mutating func object(depth: Int) throws(JSONSyntaxError) -> JSONValue {
        var members: [String: JSONValue] = [:]
        guard try enter(depth: depth, closing: UInt8(ascii: "}")) else { return .object(members) }
        repeat {
            skipWhitespace()
            guard peek() == UInt8(ascii: "\"") else { throw JSONSyntaxError() }
            let key = try string()
            skipWhitespace()
            try expect(UInt8(ascii: ":"))
            skipWhitespace()
            let member: JSONValue
            if depth == 1, key == sizedMember, peek() == UInt8(ascii: "[") {
                member = try array(depth: depth + 1, sizing: true)
            } else {
                member = try value(depth: depth)
            }
            // A repeated key is refused: readers disagree on which value counts (JSONDecoder kept the first,
            // others keep the last), and a body that means two things to two readers is a way past a check.
            guard members.updateValue(member, forKey: key) == nil else { throw JSONSyntaxError() }
        } while try another(closing: UInt8(ascii: "}"))
        return .object(members)
    }

    private mutating func array(depth: Int, sizing: Bool = false) throws(JSONSyntaxError) -> JSONValue {
        var elements: [JSONValue] = []
        guard try enter(depth: depth, closing: UInt8(ascii: "]")) else { return .array(elements) }
        repeat {
            skipWhitespace()
            let start = index
            elements.append(try value(depth: depth))
            if sizing { elementSizes.append(index - start) }
        } while try another(closing: UInt8(ascii: "]"))
        return .array(elements)
    }

    /// Steps past an object's or array's opening bracket; false when `closing` follows at once (the container
    /// is empty, and is stepped past whole).
    private mutating func enter(depth: Int, closing: UInt8) throws(JSONSyntaxError) -> Bool {
        guard depth <= JSONReader.maximumDepth else { throw JSONSyntaxError() }
        index += 1
        skipWhitespace()
        guard peek() == closing else { return true }
        index += 1
        return false
    }

    /// After a member or element, steps past what ends it: true at a comma (another follows), false at
    /// `closing` (the container ends).
    private mutating func another(closing: UInt8) throws(JSONSyntaxError) -> Bool {
        skipWhitespace()
        guard let next = peek() else { throw JSONSyntaxError() }
        index += 1
        if next == closing { return false }
        guard next == UInt8(ascii: ",") else { throw JSONSyntaxError() }
        return true
    }

    /// A string from its opening quote. Runs without escapes are validated and copied as they are.
    private mutating func string() throws(JSONSyntaxError) -> String {
        index += 1
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text = try Self.utf8(bytes[start..<index])
                index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            guard byte >= 0x20 else { throw JSONSyntaxError() }
            index += 1
        }
        var scalars: [UInt8] = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return try Self.utf8(scalars[...])
            case UInt8(ascii: "\\"):
                try escape(into: &scalars)
            case 0x00..<0x20:
                throw JSONSyntaxError()
            default:
                scalars.append(byte)
            }
        }
        throw JSONSyntaxError()
    }

    private static func utf8(_ slice: some Collection<UInt8>) throws(JSONSyntaxError) -> String {
        guard let text = String(validating: slice, as: UTF8.self) else { throw JSONSyntaxError() }
        return text
    }

    private mutating func escape(into scalars: inout [UInt8]) throws(JSONSyntaxError) {
        guard let byte = peek() else { throw JSONSyntaxError() }
        index += 1
        if let single = JSONEscape.single(byte) {
            scalars.append(single)
            return
        }
        guard byte == UInt8(ascii: "u") else { throw JSONSyntaxError() }
        let code = UInt32(try hex4())
        // U+0000 is valid JSON, but no value of this service may hold it: PostgreSQL cannot store it in text, so
        // taking it would answer the same body differently on each engine.
        guard code != 0 else { throw JSONSyntaxError() }
        let scalar: Unicode.Scalar?
        if JSONEscape.isHighSurrogate(code) {
            // A high surrogate must be followed by an escaped low one.
            try expect(UInt8(ascii: "\\"))
            try expect(UInt8(ascii: "u"))
            scalar = JSONEscape.scalar(high: code, low: UInt32(try hex4()))
        } else {
            scalar = Unicode.Scalar(code)  // nil for a lone low surrogate
        }
        guard let scalar else { throw JSONSyntaxError() }
        scalars.append(contentsOf: UTF8.encode(scalar)!)
    }

    private mutating func hex4() throws(JSONSyntaxError) -> UInt16 {
        guard bytes.count - index >= 4 else { throw JSONSyntaxError() }
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw JSONSyntaxError()
            }
            value = value << 4 | UInt16(digit)
            index += 1
        }
        return value
    }

    private mutating func digits() -> Int {
        let start = index
        while let byte = peek(), byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { index += 1 }
        return index - start
    }

    private mutating func number() throws(JSONSyntaxError) -> JSONValue {
        let start = index
        let negative = peek() == UInt8(ascii: "-")
        if negative { index += 1 }
        let integerStart = index
        let integerDigits = digits()
        guard integerDigits > 0 else { throw JSONSyntaxError() }
        if integerDigits > 1, bytes[integerStart] == UInt8(ascii: "0") { throw JSONSyntaxError() }
        var integral = true
        if peek() == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw JSONSyntaxError() }
            integral = false
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            index += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { throw JSONSyntaxError() }
            integral = false
        }
        if integral, let value = Self.integer(bytes[integerStart..<index], negative: negative) { return .int(value) }
        // With a fraction or an exponent, whether the number is whole is told from its digits, not from the nearest
        // `Double`: `50000.000000000001` and `1e-400` are not integers, though they round to 50000 and 0.
        if !integral, let whole = Self.wholeNumber(bytes[start..<index]) { return .int(whole) }
        guard let text = String(validating: bytes[start..<index], as: UTF8.self), let double = Double(text),
            double.isFinite
        else { throw JSONSyntaxError() }
        return .double(double)
    }

    /// A number with a fraction or an exponent (`-12.50e1`, grammar already checked) as an `Int` when its digits
    /// make a whole number within `Int`'s range, else nil.
    private static func wholeNumber(_ text: Slice<UnsafeRawBufferPointer>) -> Int? {
        var digits: [UInt8] = []
        var fractionDigits = 0
        var exponent = 0
        var exponentNegative = false
        var negative = false
        var part = 0  // 0: the integer part, 1: the fraction, 2: the exponent
        for byte in text {
            switch byte {
            case UInt8(ascii: "-") where part == 0: negative = true
            case UInt8(ascii: "-"): exponentNegative = true
            case UInt8(ascii: "+"): break
            case UInt8(ascii: "."): part = 1
            case UInt8(ascii: "e"), UInt8(ascii: "E"): part = 2
            default:
                let digit = Int(byte - UInt8(ascii: "0"))
                if part == 2 {
                    // Beyond 10^6 the number is far outside `Int` (or far below 1) either way.
                    exponent = min(exponent * 10 + digit, 1_000_000)
                } else {
                    // Leading zeros are not kept: each step stays constant time however many a body sends.
                    if digit != 0 || !digits.isEmpty { digits.append(byte) }
                    if part == 1 { fractionDigits += 1 }
                }
            }
        }
        // value = digits × 10^scale
        var scale = (exponentNegative ? -exponent : exponent) - fractionDigits
        if digits.isEmpty { return 0 }
        while let last = digits.last, last == UInt8(ascii: "0") {
            digits.removeLast()
            scale += 1
        }
        guard scale >= 0, digits.count + scale <= 19 else { return nil }
        digits += [UInt8](repeating: UInt8(ascii: "0"), count: scale)
        return digits.withUnsafeBytes { integer($0[...], negative: negative) }
    }

    /// Plain decimal digits as an `Int`, or nil when they overflow it.
    private static func integer(_ digits: Slice<UnsafeRawBufferPointer>, negative: Bool) -> Int? {
        var value = 0
        for byte in digits {
            let digit = Int(byte - UInt8(ascii: "0"))
            let (shifted, overflowShift) = value.multipliedReportingOverflow(by: 10)
            let (next, overflowAdd) =
                negative ? shifted.subtractingReportingOverflow(digit) : shifted.addingReportingOverflow(digit)
            if overflowShift || overflowAdd { return nil }
            value = next
        }
        return value
    }
}
