import Instrumentation

/// The W3C trace context of one span: which trace it belongs to, its own id, and whether it is sampled. Carried in
/// `InstrumentationContext` from a span to the work it encloses, and in the `traceparent` header between processes.
package struct TraceIdentity: Sendable, Hashable {
    /// 16 bytes, never all zero.
    package let traceID: [UInt8]
    /// 8 bytes, never all zero.
    package let spanID: [UInt8]
    package let sampled: Bool

    package init(traceID: [UInt8], spanID: [UInt8], sampled: Bool = true) {
        self.traceID = traceID
        self.spanID = spanID
        self.sampled = sampled
    }

    package var traceIDHex: String { Hex.encode(traceID) }
    package var spanIDHex: String { Hex.encode(spanID) }

    /// `00-<trace id>-<span id>-<flags>`.
    package var traceparent: String { "00-\(traceIDHex)-\(spanIDHex)-\(sampled ? "01" : "00")" }

    /// A `traceparent` header's identity, or nil when it is not a well-formed version-00 header (then the request
    /// starts a trace of its own, as the W3C recommendation says).
    package init?(traceparent header: String) {
        let parts = header.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count >= 4, parts[0].count == 2, parts[0] != "ff",
            let trace = Hex.decode(parts[1]), trace.count == 16, trace.contains(where: { $0 != 0 }),
            let span = Hex.decode(parts[2]), span.count == 8, span.contains(where: { $0 != 0 }),
            let flags = Hex.decode(parts[3]), flags.count == 1
        else { return nil }
        // Version 00 has exactly four fields; a later version may append more, which are ignored.
        if parts[0] == "00", parts.count != 4 { return nil }
        self.init(traceID: trace, spanID: span, sampled: flags[0] & 1 == 1)
    }

    /// Fresh random ids (a new trace's first span, or a new span's own id with `traceID` kept).
    package static func random(in traceID: [UInt8]? = nil) -> TraceIdentity {
        var generator = SystemRandomNumberGenerator()
        func bytes(_ count: Int) -> [UInt8] {
            while true {
                let candidate = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
                if candidate.contains(where: { $0 != 0 }) { return candidate }
            }
        }
        return TraceIdentity(traceID: traceID ?? bytes(16), spanID: bytes(8))
    }
}

private enum TraceIdentityKey: InstrumentationContextKey {
    typealias Value = TraceIdentity
    static var nameOverride: String? { "traceparent" }
}

extension InstrumentationContext {
    /// The span this context belongs to, if any.
    package var traceIdentity: TraceIdentity? {
        get { self[TraceIdentityKey.self] }
        set { self[TraceIdentityKey.self] = newValue }
    }
}

/// Lower-case hexadecimal, as W3C trace context and OTLP/JSON spell ids.
package enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    package static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Lower-case hex only (W3C forbids upper case), of even length.
    package static func decode(_ text: Substring) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = value(utf8[index]), let low = value(utf8[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }
}
