import Foundation
import Hummingbird
import StepDatabase
import StepStore
import Synchronization

/// Liveness, readiness, metrics and the API contract.
struct OpsController: Sendable {
    let store: Store
    let metrics: ServiceMetrics
    let drain: DrainState
    /// `http.metricsToken`: when set, `/metrics` answers only a request that presents it as its bearer secret.
    var metricsCredential: BearerSecret? = nil
    var clock: @Sendable () -> Date = { Date() }

    /// Compiled in (`scripts/embed-openapi`): nothing to find at run time.
    static let openAPIDocument = OpenAPIDocument.text

    func register(in group: RouterGroup<AppRequestContext>, catalog: inout RouteCatalog) {
        let liveness: @Sendable () async -> Response = {
            Self.text(#"{"status":"ok"}"#, contentType: "application/json")
        }
        let readiness: @Sendable () async -> Response = { [store, drain] in
            // Draining after SIGTERM: still serving, but a load balancer should send new traffic elsewhere.
            if drain.isDraining {
                var response = Self.text(#"{"status":"draining"}"#, contentType: "application/json")
                response.status = .serviceUnavailable
                return response
            }
            let ready = await Self.bounded(Self.probeSeconds) { await store.database.ping() } ?? false
            var response = Self.text(
                ready ? #"{"status":"ready","database":"ok"}"# : #"{"status":"unavailable","database":"unreachable"}"#,
                contentType: "application/json")
            response.status = ready ? .ok : .serviceUnavailable
            return response
        }
        for (path, probe) in [("/livez", liveness), ("/readyz", readiness)] {
            group.on(.get, path, catalog: &catalog) { _, _ in await probe() }
            // Load balancers that probe with HEAD (some do by default) get the GET's status and header fields.
            group.on(.head, path, catalog: &catalog) { _, _ in Self.withoutBody(await probe()) }
        }
        group.on(.get, "/metrics", catalog: &catalog) { request, _ in
            if let metricsCredential {
                guard let presented = AdminAuthenticator.bearer(request), metricsCredential.matches(presented) else {
                    return Self.metricsRefused
                }
            }
            // The review desk's figures, the queue's depth among them, are read at scrape time, for at most
            // `probeSeconds`: a database that is away or slow leaves the last values, and the scrape is answered
            // within the scraper's timeout whatever the database does.
            let now = clock()
            let snapshot = await Self.bounded(Self.probeSeconds) {
                try await store.withoutTransaction { try await $0.adminMetrics(now: now) }
            }
            if let snapshot {
                metrics.setQueueDepth(snapshot.jobsByState)
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

    /// A GET's answer as HEAD's: the same status and header fields, `Content-Length` the GET's, and no body.
    static func withoutBody(_ response: Response) -> Response {
        var head = response
        head.body = ResponseBody(contentLength: response.body.contentLength) { _ in }
        return head
    }

    /// How long `/readyz` and `/metrics` wait for each database read: a probe or a scrape must be answered within
    /// its own timeout (Prometheus' 10 s, a load balancer's few seconds), while an unreachable database holds a
    /// read up to the unit deadline (15 s by default) and, on PostgreSQL, for the pool's first minute of failed
    /// connects.
    static let probeSeconds: Double = 2

    /// `body`'s value, or nil when it fails, has not answered within `seconds`, or the caller is cancelled (a probe
    /// whose client hung up). The caller is answered then even when `body` does not stop on cancellation (a unit
    /// queued behind SQLite's busy writer runs when its turn comes): `body` runs in a task of its own, cancelled and
    /// left to finish by itself.
    static func bounded<T: Sendable>(_ seconds: Double, _ body: @escaping @Sendable () async throws -> T) async -> T? {
        let answer = FirstAnswer<T?>()
        let work = Task { answer.give(try? await body()) }
        let timer = Task {
            try? await Task.sleep(for: .seconds(seconds))
            answer.give(nil)
        }
        defer {
            work.cancel()
            timer.cancel()
        }
        return await withTaskCancellationHandler {
            await answer.value()
        } onCancel: {
            answer.give(nil)
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

/// The first of several answers, whichever task gives it, awaited once (`value`); an answer given before the wait
/// is kept for it, the later ones dropped.
final class FirstAnswer<Value: Sendable>: Sendable {
    private enum State {
        case empty
        case waiting(CheckedContinuation<Value, Never>)
        case given(Value)
        case taken
    }

    private let state = Mutex<State>(.empty)

    /// The first answer, once one is given. Awaited by one task, once.
    func value() async -> Value {
        await withCheckedContinuation { continuation in
            let given: Value? = state.withLock { state in
                switch state {
                case .given(let value):
                    state = .taken
                    return value
                case .empty:
                    state = .waiting(continuation)
                    return nil
                case .waiting, .taken:
                    preconditionFailure("FirstAnswer.value() awaited twice")
                }
            }
            if let given { continuation.resume(returning: given) }
        }
    }

    /// Gives `value` unless another answer came first; says whether this one did.
    @discardableResult
    func give(_ value: Value) -> Bool {
        let (first, waiting) = state.withLock { state -> (Bool, CheckedContinuation<Value, Never>?) in
            switch state {
            case .empty:
                state = .given(value)
                return (true, nil)
            case .waiting(let continuation):
                state = .taken
                return (true, continuation)
            case .given, .taken:
                return (false, nil)
            }
        }
        waiting?.resume(returning: value)
        return first
    }
}
