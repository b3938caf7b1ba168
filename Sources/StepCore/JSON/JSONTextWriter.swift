/// Writes JSON text the way `JSONCoding.encode` (`JSONEncoder`, sorted keys, slashes unescaped) does, for
/// bodies on the hot path whose shape is fixed: the caller writes members in sorted key order.
package struct JSONTextWriter {
    package private(set) var bytes: [UInt8] = []
    private var needsComma = false

    package init(capacity: Int = 512) {
        bytes.reserveCapacity(capacity)
    }

    package var text: String { String(decoding: bytes, as: UTF8.self) }

    package mutating func beginObject() {
        open(UInt8(ascii: "{"))
    }

    package mutating func endObject() {
        close(UInt8(ascii: "}"))
    }

    package mutating func beginArray() {
        open(UInt8(ascii: "["))
    }

    package mutating func endArray() {
        close(UInt8(ascii: "]"))
    }

    /// A member's key; its value follows.
    package mutating func key(_ name: StaticString) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        bytes.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        needsComma = false
    }

    package mutating func value(_ number: Int) {
        separate()
        bytes.append(contentsOf: String(number).utf8)
        needsComma = true
    }

    package mutating func value(_ flag: Bool) {
        separate()
        bytes.append(contentsOf: (flag ? "true" : "false").utf8)
        needsComma = true
    }

    package mutating func null() {
        separate()
        bytes.append(contentsOf: "null".utf8)
        needsComma = true
    }

    package mutating func value(_ text: String) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x08: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0C: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x00..<0x20:
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                bytes.append(contentsOf: [Self.hexDigits[Int(byte >> 4)], Self.hexDigits[Int(byte & 0x0F)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
        needsComma = true
    }

    package mutating func value(_ text: String?) {
        if let text { value(text) } else { null() }
    }

    package mutating func value(_ number: Int?) {
        if let number { value(number) } else { null() }
    }

    /// A number kept in whole thousandths (`Milli`), written as the decimal it stands for.
    package mutating func value(milli: Int) {
        separate()
        bytes.append(contentsOf: Milli.text(milli).utf8)
        needsComma = true
    }

    /// A value that is JSON text already (written by this writer, or stored as such: an event's data, a stored
    /// response body), written as it is.
    package mutating func raw(_ json: String) {
        separate()
        bytes.append(contentsOf: json.utf8)
        needsComma = true
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// An object's or array's opening bracket: its first member or element follows without a comma.
    private mutating func open(_ bracket: UInt8) {
        separate()
        bytes.append(bracket)
        needsComma = false
    }

    /// An object's or array's closing bracket: what follows it is the next value, after a comma.
    private mutating func close(_ bracket: UInt8) {
        bytes.append(bracket)
        needsComma = true
    }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }
}
