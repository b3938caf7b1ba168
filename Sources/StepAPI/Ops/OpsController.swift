import Foundation
import Hummingbird
import StepJobs
import StepStore

/// Liveness, readiness, metrics and the API contract.
struct OpsController: Sendable {
    let store: Store
    let metrics: ServiceMetrics
    let jobs: JobQueue

    static let openAPIDocument: String = {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "yaml"),
            let text = try? String(contentsOf: url, encoding: .utf8)
        else { return "" }
        return text
    }()

    func register(in router: Router<AppRequestContext>, catalog: inout RouteCatalog) {
        router.get("/livez") { _, _ in
            Self.text(#"{"status":"ok"}"#, contentType: "application/json")
        }
        router.get("/readyz") { _, _ in
            let ready = await store.database.ping()
            var response = Self.text(
                ready ? #"{"status":"ready","database":"ok"}"# : #"{"status":"unavailable","database":"unreachable"}"#,
                contentType: "application/json")
            response.status = ready ? .ok : .serviceUnavailable
            return response
        }
        router.get("/metrics") { _, _ in
            // The queue's depth is read at scrape time; a database that is away leaves the last values.
            if let depth = try? await jobs.depth() {
                metrics.setQueueDepth(Dictionary(uniqueKeysWithValues: depth.map { ($0.key.rawValue, $0.value) }))
            }
            return Self.text(metrics.render(), contentType: "text/plain; version=0.0.4; charset=utf-8")
        }
        router.get("/openapi.yaml") { _, _ in
            Self.text(Self.openAPIDocument, contentType: "application/yaml")
        }
        for path in ["/livez", "/readyz", "/metrics", "/openapi.yaml"] { catalog.add(.get, path) }
    }

    static func text(_ body: String, contentType: String) -> Response {
        Response(status: .ok, headers: [.contentType: contentType], body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}
