import AsyncHTTPClient
import Instrumentation
import Logging
import NIOHTTP1
import Tracing

/// Writes `traceparent` (and whatever else the installed instrument carries) into an outbound request's headers.
package struct HTTPHeadersInjector: Injector {
    package init() {}

    package func inject(_ value: String, forKey key: String, into headers: inout HTTPHeaders) {
        headers.replaceOrAdd(name: key, value: value)
    }
}

extension HTTPClientRequest {
    /// Adds the current trace context's `traceparent`, so the receiver's spans join this trace.
    package mutating func injectTraceContext() {
        guard let context = InstrumentationContext.current else { return }
        InstrumentationSystem.instrument.inject(context, into: &headers, using: HTTPHeadersInjector())
    }
}

extension Logger.MetadataProvider {
    /// Adds `traceId` and `spanId` to every log line written inside a span, so a line leads to its trace.
    package static let traceIdentity = Logger.MetadataProvider {
        guard let identity = InstrumentationContext.current?.traceIdentity else { return [:] }
        return ["traceId": .string(identity.traceIDHex), "spanId": .string(identity.spanIDHex)]
    }
}
