import Instrumentation
import Tracing

/// StepLedger's tracer: W3C `traceparent` in and out, every span exported over OTLP/HTTP by `OTLPExporter`.
/// Installed with `InstrumentationSystem.bootstrap` by `stepd serve` and `stepd worker` when `tracing.otlpEndpoint`
/// is set; without it the no-op tracer stays and spans cost next to nothing.
package struct OTLPTracer: Tracer {
    package typealias Span = OTLPSpan

    let exporter: OTLPExporter

    package init(exporter: OTLPExporter) {
        self.exporter = exporter
    }

    package func startSpan<Instant: TracerInstant>(
        _ operationName: String,
        context: @autoclosure () -> InstrumentationContext,
        ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant,
        function: String,
        file fileID: String,
        line: UInt
    ) -> OTLPSpan {
        var spanContext = context()
        let parent = spanContext.traceIdentity
        let identity = TraceIdentity.random(in: parent?.traceID)
        spanContext.traceIdentity = identity
        let exporter = self.exporter
        return OTLPSpan(
            name: operationName, kind: kind, identity: identity, parentSpanID: parent?.spanID, context: spanContext,
            startNanoseconds: instant().nanosecondsSinceEpoch, finish: { exporter.enqueue($0) })
    }

    package func activeSpan(identifiedBy context: InstrumentationContext) -> OTLPSpan? { nil }

    package func forceFlush() {
        exporter.requestFlush()
    }

    package func extract<Carrier, Extract: Extractor>(
        _ carrier: Carrier, into context: inout InstrumentationContext, using extractor: Extract
    ) where Extract.Carrier == Carrier {
        if let header = extractor.extract(key: "traceparent", from: carrier),
            let identity = TraceIdentity(traceparent: header)
        {
            context.traceIdentity = identity
        }
    }

    package func inject<Carrier, Inject: Injector>(
        _ context: InstrumentationContext, into carrier: inout Carrier, using injector: Inject
    ) where Inject.Carrier == Carrier {
        if let identity = context.traceIdentity {
            injector.inject(identity.traceparent, forKey: "traceparent", into: &carrier)
        }
    }
}
