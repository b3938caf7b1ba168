import Foundation
import Hummingbird
import Logging
import StepCore
import StepDatabase
import StepJobs
import StepStore

/// The operators' API under `/admin/`: the review queue and the job queue. It is authenticated by its own
/// secret (`admin.token`), compared in constant time; a walker's session token never works here. A client
/// address with `admin.maxFailuresPerMinute` failed attempts in the current minute is refused (429) until the
/// minute ends. Without a configured secret every admin route answers 404, as if it did not exist.
struct AdminController: Sendable {
    static let reviewsRoute = "/admin/reviews"
    static let resolveRoute = "/admin/reviews/{id}/resolve"
    static let jobsRoute = "/admin/jobs"
    static let maxNoteLength = 2_000

    /// The configured secret; nil when the admin API is off.
    let credential: AdminCredential?
    let failures: AdminFailureLimiter
    let resolver: ReviewResolver
    let jobs: JobQueue
    let clock: @Sendable () -> Date
    let logger: Logger

    init(
        token: String?, failures: AdminFailureLimiter, resolver: ReviewResolver, jobs: JobQueue,
        clock: @escaping @Sendable () -> Date, logger: Logger
    ) {
        self.credential = token.map(AdminCredential.init(token:))
        self.failures = failures
        self.resolver = resolver
        self.jobs = jobs
        self.clock = clock
        self.logger = logger
    }

    func register(in router: Router<AppRequestContext>, catalog: inout RouteCatalog) {
        router.get(RouterPath(stringLiteral: Self.reviewsRoute)) { request, context in
            await guarded(request, context) { try await reviews(request) }
        }
        router.post("/admin/reviews/:id/resolve") { request, context in
            await guarded(request, context) { try await resolve(request, id: context.parameters.get("id") ?? "") }
        }
        router.get(RouterPath(stringLiteral: Self.jobsRoute)) { request, context in
            await guarded(request, context) { try await listJobs(request) }
        }
        catalog.add(.get, Self.reviewsRoute)
        catalog.add(.post, Self.resolveRoute)
        catalog.add(.get, Self.jobsRoute)
    }

    // MARK: Routes

    private func reviews(_ request: Request) async throws -> Response {
        let status = request.uri.queryParameters.get("status") ?? "open"
        guard status == "open" || status == "resolved" else {
            return Self.error(.badRequest, "INVALID_REQUEST", "status must be open or resolved.")
        }
        let entries = try await resolver.store.withoutTransaction { try await $0.reviews(open: status == "open") }
        return Self.json(.ok, .object(["items": .array(entries.map(Self.item))]))
    }

    private func resolve(_ request: Request, id: String) async throws -> Response {
        var request = request
        guard let body = try? await request.collectBody(upTo: 16 * 1024),
            case .object(let fields) = JSONReader.read(body.readableBytesView)
        else {
            return Self.error(.badRequest, "INVALID_REQUEST", "The body must be a JSON object.")
        }
        guard case .string(let decisionText) = fields["decision"], let decision = ReviewDecision(rawValue: decisionText)
        else {
            return Self.error(.badRequest, "INVALID_REQUEST", "decision must be accept or reject.")
        }
        guard case .string(let note) = fields["note"], !note.isEmpty, note.count <= Self.maxNoteLength else {
            return Self.error(
                .badRequest, "INVALID_REQUEST",
                "note must be a non-empty string of at most \(Self.maxNoteLength) characters.")
        }
        switch try await resolver.resolve(id: id, decision: decision, note: note, now: clock()) {
        case .resolved(let entry):
            logger.info(
                "review resolved",
                metadata: [
                    "review": .string(entry.id), "walker": .string(entry.walkerId), "decision": .string(decisionText),
                ])
            return Self.json(.ok, Self.item(entry))
        case .notFound:
            return Self.error(.notFound, "NOT_FOUND", "No review entry has this id.")
        case .alreadyResolved:
            return Self.error(.conflict, "ALREADY_RESOLVED", "This review entry is already resolved.")
        }
    }

    private func listJobs(_ request: Request) async throws -> Response {
        var state: JobState?
        if let text = request.uri.queryParameters.get("state") {
            guard let parsed = JobState(rawValue: text) else {
                return Self.error(.badRequest, "INVALID_REQUEST", "state must be pending, running or dead.")
            }
            state = parsed
        }
        let records = try await jobs.list(state: state)
        return Self.json(.ok, .object(["items": .array(records.map(Self.item))]))
    }

    // MARK: Authentication and errors

    /// 404 while the admin API is off, 429 while the client's address is locked out, 401 without the admin
    /// secret (counted against the address), 503 or 500 when the store fails.
    private func guarded(
        _ request: Request, _ context: AppRequestContext, _ body: () async throws -> Response
    ) async -> Response {
        guard let credential else { return Self.error(.notFound, "NOT_FOUND", "Not found.") }
        let address = context.remoteAddress?.ipAddress ?? AdminFailureLimiter.unknownAddress
        let now = clock()
        do {
            if let retryAfter = try await failures.lockout(address: address, now: now) {
                var response = Self.error(
                    .tooManyRequests, "RATE_LIMITED", "Too many failed admin authentications; retry later.")
                response.headers[.retryAfter] = String(retryAfter)
                return response
            }
            guard let presented = Self.bearer(request), credential.matches(presented) else {
                try await failures.recordFailure(address: address, now: now)
                logger.warning("admin authentication failed", metadata: ["client": .string(address)])
                var response = Self.error(.unauthorized, "UNAUTHORIZED", "A valid admin token is required.")
                response.headers[.wwwAuthenticate] = "Bearer"
                return response
            }
            return try await body()
        } catch let error as StoreError where error.isUnavailable {
            logger.warning("store unavailable", metadata: ["error": .string(error.detail)])
            return Self.error(.serviceUnavailable, "SERVICE_UNAVAILABLE", "The service is temporarily unavailable.")
        } catch {
            logger.error("admin request failed", metadata: ["error": .string(String(describing: type(of: error)))])
            return Self.error(.internalServerError, "INTERNAL_ERROR", "An unexpected error occurred.")
        }
    }

    private static func bearer(_ request: Request) -> String? {
        guard let value = request.headers[.authorization] else { return nil }
        let trimmed = value[...].trimmingHTTPWhitespace
        guard trimmed.count > 7, trimmed.prefix(7).lowercased() == "bearer " else { return nil }
        return String(trimmed.dropFirst(7).trimmingHTTPWhitespace)
    }

    // MARK: Bodies

    static func item(_ entry: ReviewEntry) -> JSONValue {
        var fields: [String: JSONValue] = [
            "id": .string(entry.id), "walkerId": .string(entry.walkerId), "kind": .string(entry.kind.rawValue),
            "day": entry.day.map { .string($0.description) } ?? .null,
            "reasons": .array(entry.reasons.map(JSONValue.string)),
            "openedAt": .string(InstantParser.format(entry.openedAt)),
            "status": .string(entry.isOpen ? "open" : "resolved"),
        ]
        if let resolvedAt = entry.resolvedAt {
            fields["resolvedAt"] = .string(InstantParser.format(resolvedAt))
            fields["decision"] = entry.decision.map { .string($0.rawValue) } ?? .null
            fields["note"] = entry.note.map(JSONValue.string) ?? .null
        }
        return .object(fields)
    }

    static func item(_ job: JobRecord) -> JSONValue {
        .object([
            "id": .string(job.id), "walkerId": .string(job.walkerId), "kind": .string(job.kind),
            "state": .string(job.state.rawValue), "attempts": .int(job.attempts), "maxAttempts": .int(job.maxAttempts),
            "runAt": .string(InstantParser.format(job.runAt)),
            "lastError": job.lastError.map(JSONValue.string) ?? .null,
            "createdAt": .string(InstantParser.format(job.createdAt)),
        ])
    }

    static func json(_ status: HTTPResponse.Status, _ value: JSONValue) -> Response {
        IngestController.jsonResponse(status: status, body: (try? JSONCoding.encode(value)) ?? "{}")
    }

    static func error(_ status: HTTPResponse.Status, _ code: String, _ message: String) -> Response {
        json(status, .object(["error": .string(code), "message": .string(message), "details": .object([:])]))
    }
}
