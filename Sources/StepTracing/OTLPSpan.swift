import Instrumentation
import Synchronization
import Tracing

/// A finished span as it is exported: plain values, no locks.
package struct FinishedSpan: Sendable {
    package var name: String
    package var kind: SpanKind
    package var identity: TraceIdentity
    package var parentSpanID: [UInt8]?
    package var startNanoseconds: UInt64
    package var endNanoseconds: UInt64
    package var attributes: SpanAttributes
    package var isError: Bool
    package var statusMessage: String?
    package var events: [SpanEvent]
}

/// A span of `OTLPTracer`: recorded under a lock until it ends, then handed to the exporter once.
package final class OTLPSpan: Tracing.Span {
    private struct State {
        var name: String
        var attributes: SpanAttributes = [:]
        var status: SpanStatus?
        var events: [SpanEvent] = []
        var ended = false
    }

    package let context: InstrumentationContext
    private let identity: TraceIdentity
    private let parentSpanID: [UInt8]?
    private let kind: SpanKind
    private let startNanoseconds: UInt64
    private let state: Mutex<State>
    private let finish: @Sendable (FinishedSpan) -> Void

    init(
        name: String, kind: SpanKind, identity: TraceIdentity, parentSpanID: [UInt8]?, context: InstrumentationContext,
        startNanoseconds: UInt64, finish: @escaping @Sendable (FinishedSpan) -> Void
    ) {
        self.identity = identity
        self.parentSpanID = parentSpanID
        self.kind = kind
        self.context = context
        self.startNanoseconds = startNanoseconds
        self.state = Mutex(State(name: name))
        self.finish = finish
    }

    package var operationName: String {
        get { state.withLock { $0.name } }
        set { state.withLock { $0.name = newValue } }
    }

    package var attributes: SpanAttributes {
        get { state.withLock { $0.attributes } }
        set { state.withLock { $0.attributes = newValue } }
    }

    package var isRecording: Bool { state.withLock { !$0.ended } }

    package func setStatus(_ status: SpanStatus) {
        state.withLock { $0.status = status }
    }

    package func addEvent(_ event: SpanEvent) {
        state.withLock { if !$0.ended { $0.events.append(event) } }
    }

    /// Records the error's type only: an error's description may carry what a request sent.
    package func recordError<Instant: TracerInstant>(
        _ error: any Error, attributes: SpanAttributes, at instant: @autoclosure () -> Instant
    ) {
        var recorded = attributes
        recorded["exception.type"] = "\(type(of: error))"
        addEvent(SpanEvent(name: "exception", at: instant(), attributes: recorded))
    }

    package func addLink(_ link: SpanLink) {}

    /// The most UTF-8 bytes a string attribute keeps when it leaves the process.
    static let maxStringAttributeBytes = 512

    /// The attributes as they leave the process. A request's query (`url.query`, set by the HTTP tracing
    /// middleware) keeps its parameter names only, and only names that look like one (up to 32 letters, digits,
    /// `_`, `-`, `.`; anything else is `?`): its values, or a bare value, are whatever a client put there. Every
    /// string is then cut to `maxStringAttributeBytes` (a path or `User-Agent` may be as long as the header limit
    /// allows, and the export queue holds thousands of spans while a collector does not answer).
    static func exported(_ attributes: SpanAttributes) -> SpanAttributes {
        let named = namesOfQuery(attributes)
        var exported = named
        named.forEach { name, value in
            guard case .string(let text) = value, text.utf8.count > maxStringAttributeBytes else { return }
            // Whole characters, and room for the mark of the cut (three bytes).
            var kept = ""
            for character in text {
                guard kept.utf8.count + character.utf8.count <= maxStringAttributeBytes - 3 else { break }
                kept.append(character)
            }
            exported.set(name, value: .string(kept + "…"))
        }
        return exported
    }

    /// `url.query` with its parameter names only (see `exported`).
    private static func namesOfQuery(_ attributes: SpanAttributes) -> SpanAttributes {
        guard case .string(let query)? = attributes.get("url.query") else { return attributes }
        var exported = attributes
        let names = query.split(separator: "&", omittingEmptySubsequences: true).map { parameter -> String in
            let name = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let plain =
                name.utf8.count <= 32
                && name.unicodeScalars.allSatisfy {
                    ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
                        || "_-.".unicodeScalars.contains($0)
                }
            return plain ? String(name) : "?"
        }
        exported.set("url.query", value: .string(names.joined(separator: "&")))
        return exported
    }

    package func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
        let finished: FinishedSpan? = state.withLock { state in
            guard !state.ended else { return nil }
            state.ended = true
            return FinishedSpan(
                name: state.name, kind: kind, identity: identity, parentSpanID: parentSpanID,
                startNanoseconds: startNanoseconds, endNanoseconds: instant().nanosecondsSinceEpoch,
                attributes: Self.exported(state.attributes), isError: state.status?.code == .error,
                statusMessage: state.status?.message, events: state.events)
        }
        if let finished { finish(finished) }
    }
}
