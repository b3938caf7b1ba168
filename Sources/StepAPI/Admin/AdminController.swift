import Foundation
import Hummingbird
import Logging
import StepCore
import StepDatabase
import StepJobs
import StepStore

/// The operators' API under `/admin/`: the review queue and the job queue, behind `AdminAuthMiddleware`.
struct AdminController: Sendable {
    static let reviewsRoute = "/admin/reviews"
    static let resolveRoute = "/admin/reviews/{id}/resolve"
    static let jobsRoute = "/admin/jobs"
    static let maxNoteLength = 2_000

    let resolver: ReviewResolver
    let jobs: JobQueue
    let clock: @Sendable () -> Date
    let logger: Logger

    func register(in group: RouterGroup<AppRequestContext>, catalog: inout RouteCatalog) {
        group.on(.get, Self.reviewsRoute, catalog: &catalog) { request, context in
            _ = try context.requireAdmin(.read)
            return try await reviews(request)
        }
        group.on(.post, Self.resolveRoute, catalog: &catalog) { request, context in
            try await resolve(request, id: context.parameters.get("id") ?? "", actor: context.requireAdmin(.decide))
        }
        group.on(.get, Self.jobsRoute, catalog: &catalog) { request, context in
            _ = try context.requireAdmin(.read)
            return try await listJobs(request)
        }
    }

    // MARK: Routes

    private func reviews(_ request: Request) async throws -> Response {
        let status = request.uri.queryParameters.get("status") ?? "open"
        guard status == "open" || status == "resolved" else {
            throw AdminAPIError.badRequest("status must be open or resolved.")
        }
        let entries = try await resolver.store.withoutTransaction { try await $0.reviews(open: status == "open") }
        return Self.json(.ok, .object(["items": .array(entries.map(Self.item))]))
    }

    private func resolve(_ request: Request, id: String, actor: AdminActor) async throws -> Response {
        var request = request
        guard let body = try? await request.collectBody(upTo: 16 * 1024),
            case .object(let fields) = JSONReader.read(body.readableBytesView)
        else {
            throw AdminAPIError.bodyRefused(.unsupportedMediaType)
        }
        guard case .string(let decisionText) = fields["decision"], let decision = ReviewDecision(rawValue: decisionText)
        else {
            throw AdminAPIError.badRequest("decision must be accept or reject.")
        }
        guard case .string(let note) = fields["note"], !note.isEmpty, note.count <= Self.maxNoteLength else {
            throw AdminAPIError.badRequest(
                "note must be a non-empty string of at most \(Self.maxNoteLength) characters.")
        }
        switch try await resolver.resolve(id: id, decision: decision, note: note, by: actor, now: clock()) {
        case .resolved(let entry):
            logger.adminAction(
                actor, action: "review.\(decisionText)", target: entry.id, outcome: "decided", note: note,
                walkerId: entry.walkerId)
            return Self.json(.ok, Self.item(entry))
        case .notFound:
            throw AdminAPIError.notFound("No review entry has this id.")
        case .alreadyResolved:
            throw AdminAPIError.alreadyResolved
        }
    }

    private func listJobs(_ request: Request) async throws -> Response {
        var state: JobState?
        if let text = request.uri.queryParameters.get("state") {
            guard let parsed = JobState(rawValue: text) else {
                throw AdminAPIError.badRequest("state must be pending, running or dead.")
            }
            state = parsed
        }
        let records = try await jobs.list(state: state)
        return Self.json(.ok, .object(["items": .array(records.map(Self.item))]))
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
        if let reread = entry.reread, let value = JSONReader.read(Array(reread.utf8)) {
            fields["reread"] = value
        }
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
        .json(status: status, body: (try? JSONCoding.encode(value)) ?? "{}")
    }
}
