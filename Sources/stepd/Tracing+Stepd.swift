import Instrumentation
import Logging
import StepSettings
import StepTracing

extension AppConfiguration {
    /// With `tracing.otlpEndpoint` set: installs the OTLP tracer for this process and returns its exporter, a
    /// service to run beside the others (first in the group, so it stops last and sends the final spans).
    func bootstrapTracing(logger: Logger) -> OTLPExporter? {
        guard let endpoint = tracing.otlpEndpoint else { return nil }
        let exporter = OTLPExporter(
            settings: .init(
                endpoint: endpoint, serviceName: tracing.serviceName,
                serviceVersion: StepdVersion.version),
            logger: logger)
        InstrumentationSystem.bootstrap(OTLPTracer(exporter: exporter))
        return exporter
    }
}
