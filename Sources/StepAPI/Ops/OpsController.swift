import Foundation
import Hummingbird
import StepDatabase
import StepJobs
import StepStore

/// Liveness, readiness, metrics and the API contract.
struct OpsController: Sendable {
    let store: Store
    let metrics: ServiceMetrics
    let jobs: JobQueue
    let drain: DrainState
    /// `http.metricsToken`: when set, `/metrics` answers only a request that presents it as its bearer secret.
    var metricsCredential: BearerSecret? = nil
    var clock: @Sendable () -> Date = { Date() }

    /// Compiled in (`scripts/embed-openapi`): nothing to find at run time.
    static let openAPIDocument = OpenAPIDocument.text

    func register(in group: RouterGroup<AppRequestContext>, catalog: inout RouteCatalog) {
        group.on(.get, "/livez", catalog: &catalog) { _, _ in
            Self.text(#"{"status":"ok"}"#, contentType: "application/json")
        }
        group.on(.get, "/readyz", catalog: &catalog) { _, _ in
            // Draining after SIGTERM: still serving, but a load balancer should send new traffic elsewhere.
            if drain.isDraining {
                var response = Self.text(#"{"status":"draining"}"#, contentType: "application/json")
                response.status = .serviceUnavailable
                return response
            }
            let ready = await store.database.ping()
            var response = Self.text(
                ready ? #"{"status":"ready","database":"ok"}"# : #"{"status":"unavailable","database":"unreachable"}"#,
                contentType: "application/json")
            response.status = ready ? .ok : .serviceUnavailable
            return response
        }
        group.on(.get, "/metrics", catalog: &catalog) { request, _ in
            if let metricsCredential {
                guard let presented = AdminAuthenticator.bearer(request), metricsCredential.matches(presented) else {
                    return Self.metricsRefused
                }
            }
            // The queue's depth is read at scrape time; a database that is away leaves the last values.
            if let depth = try? await jobs.depth() {
                metrics.setQueueDepth(Dictionary(uniqueKeysWithValues: depth.map { ($0.key.rawValue, $0.value) }))
            }
            if let snapshot = try? await store.withoutTransaction({ try await $0.adminMetrics(now: clock()) }) {
                metrics.setAdminMetrics(snapshot)
            }
            if let counts = store.replicas?.readCounts {
                metrics.raiseReadCounters(
                    primary: counts.primary, replica: counts.replica, replicaFailures: counts.replicaFailures)
            }
            if let cache = store.ingestCache {
                metrics.raiseCachedIngestCounters(applied: cache.applied, overtaken: cache.overtaken)
            }
            return Self.text(metrics.render(), contentType: "text/plain; version=0.0.4; charset=utf-8")
        }
        group.on(.get, "/openapi.yaml", catalog: &catalog) { _, _ in
            Self.text(Self.openAPIDocument, contentType: "application/yaml")
        }
    }

    /// The answer to a scrape that does not present `http.metricsToken`: 401, nothing read from the database.
    static var metricsRefused: Response {
        var response = text(
            #"{"error":"UNAUTHORIZED","message":"A valid metrics token is required.","details":{}}"#,
            contentType: "application/json")
        response.status = .unauthorized
        response.headers[.wwwAuthenticate] = "Bearer"
        return response
    }

    static func text(_ body: String, contentType: String) -> Response {
        Response(status: .ok, headers: [.contentType: contentType], body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}
