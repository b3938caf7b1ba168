import Foundation
import Hummingbird
import Logging
import StepCore
import StepJobs
import StepStore

/// The job queue over HTTP under `/admin/jobs`: the list (any role with `read`), and retrying or discarding dead
/// jobs one at a time or up to 100 at once (`manageJobs`). Every job an action changes gets its own audit row,
/// written in the transaction that changes it, and its own log line.
struct AdminJobsController: Sendable {
    static let jobsRoute = "/admin/jobs"
    static let retryRoute = "/admin/jobs/{id}/retry"
    static let discardRoute = "/admin/jobs/{id}/discard"
    static let bulkRoute = "/admin/jobs/bulk"
    static let maxLimit = 500
    static let defaultLimit = 100

    enum Action: String, Sendable {
        case retry
        case discard

        var auditName: String { "job.\(rawValue)" }
    }

    let jobs: JobQueue
    let clock: @Sendable () -> Date
    let logger: Logger

    func register(in group: RouterGroup<AppRequestContext>, catalog: inout RouteCatalog) {
        group.on(.get, Self.jobsRoute, catalog: &catalog) { request, context in
            _ = try context.requireAdmin(.read)
            return try await list(request)
        }
        group.on(.post, Self.retryRoute, catalog: &catalog) { _, context in
            try await single(.retry, id: context.parameters.get("id") ?? "", actor: context.requireAdmin(.manageJobs))
        }
        group.on(.post, Self.discardRoute, catalog: &catalog) { _, context in
            try await single(
                .discard, id: context.parameters.get("id") ?? "", actor: context.requireAdmin(.manageJobs))
        }
        group.on(.post, Self.bulkRoute, catalog: &catalog) { request, context in
            try await bulk(request, actor: context.requireAdmin(.manageJobs), requestId: context.requestId)
        }
    }

    // MARK: Routes

    private func list(_ request: Request) async throws -> Response {
        let query = request.uri.queryParameters
        if let name = query.repeated(among: ["state", "kind", "limit", "cursor"]) {
            throw AdminAPIError.badRequest("\(name) must be given once.")
        }
        var state: JobState?
        if let text = query.get("state") {
            guard let parsed = JobState(rawValue: text) else {
                throw AdminAPIError.badRequest("state must be pending, running or dead.")
            }
            state = parsed
        }
        let kind = query.get("kind")
        if let kind, kind.isEmpty || kind.unicodeScalars.count > 100 {
            throw AdminAPIError.badRequest("kind must be a job kind of 1 to 100 characters.")
        }
        var limit = Self.defaultLimit
        if let text = query.get("limit") {
            guard let parsed = Int(text), (1...Self.maxLimit).contains(parsed) else {
                throw AdminAPIError.badRequest("limit must be an integer from 1 to \(Self.maxLimit).")
            }
            limit = parsed
        }
        var cursor: JobCursor?
        if let text = query.get("cursor") {
            guard let parsed = KeysetCursor(text: text, list: .jobs) else {
                throw AdminAPIError.badRequest("cursor must be the nextCursor of an earlier page.")
            }
            cursor = JobCursor(runAt: parsed.instant, id: parsed.id)
        }
        // One more than the page tells whether more remain.
        let records = try await jobs.list(state: state, kind: kind, after: cursor, limit: limit + 1)
        let page = records.prefix(limit)
        let next: JSONValue =
            records.count > limit
            ? page.last.map { .string(KeysetCursor($0.runAt, id: $0.id, list: .jobs).text) } ?? .null : .null
        return AdminController.json(
            .ok, .object(["items": .array(page.map(Self.item)), "nextCursor": next]))
    }

    private func single(_ action: Action, id: String, actor: AdminActor) async throws -> Response {
        let applied = try await apply(action, id: id, actor: actor)
        switch applied.outcome {
        case "not_found": throw AdminAPIError.notFound("No job has this id.")
        case "not_dead":
            throw AdminAPIError.conflict(
                code: "NOT_DEAD", message: "Only a dead job can be retried or discarded.", details: [:])
        case "still_needed":
            throw AdminAPIError.conflict(
                code: "JOB_STILL_NEEDED",
                message: "This job alone can still decide its walker's day (a PENDING day's reconcile, an open "
                    + "re-read's deadline) or pay a refund its walker is owed: retry it.",
                details: [:])
        default: return AdminController.json(.ok, applied.item(id: id))
        }
    }

    private func bulk(_ request: Request, actor: AdminActor, requestId: String) async throws -> Response {
        let body = try await AdminRequestBody.read(request)
        guard case .string(let actionText) = body.fields["action"], let action = Action(rawValue: actionText) else {
            throw AdminAPIError.badRequest("action must be retry or discard.")
        }
        let ids = try body.bulkIds(of: "job")
        var items: [JSONValue] = []
        for id in ids {
            let applied: Applied
            do {
                applied = try await apply(action, id: id, actor: actor)
            } catch {
                throw AdminAPIError.bulk(
                    error, applied: items, total: ids.count, requestId: requestId, logger: logger)
            }
            items.append(applied.item(id: id))
        }
        return AdminController.json(.ok, .object(["items": .array(items)]))
    }

    /// What one job's action did: the contract's outcome name (`retried`, `coalesced`, `discarded`, `not_dead`,
    /// `not_found`, `still_needed`) and, for `coalesced`, the pending job that does the work now.
    struct Applied: Sendable {
        var outcome: String
        var into: String?

        func item(id: String) -> JSONValue {
            var fields: [String: JSONValue] = ["id": .string(id), "outcome": .string(outcome)]
            if let into { fields["into"] = .string(into) }
            return .object(fields)
        }
    }

    /// One job's action and, when it changed the job, its audit row, in one transaction.
    private func apply(_ action: Action, id: String, actor: AdminActor) async throws -> Applied {
        let now = clock()
        let outcome: String
        var into: String?
        switch action {
        case .retry:
            switch try await jobs.retry(id: id, by: actor, now: now) {
            case .retried: outcome = "retried"
            case .coalesced(let pending):
                outcome = "coalesced"
                into = pending
            case .notFound: outcome = "not_found"
            case .notDead: outcome = "not_dead"
            }
        case .discard:
            switch try await jobs.discard(id: id, by: actor, now: now) {
            case .discarded: outcome = "discarded"
            case .notFound: outcome = "not_found"
            case .notDead: outcome = "not_dead"
            case .stillNeeded: outcome = "still_needed"
            }
        }
        if !["not_found", "not_dead", "still_needed"].contains(outcome) {
            logger.adminAction(actor, action: action.auditName, target: id, outcome: outcome, note: nil)
        }
        return Applied(outcome: outcome, into: into)
    }

    // MARK: Bodies

    static func item(_ job: JobRecord) -> JSONValue {
        .object([
            "id": .string(job.id), "walkerId": .string(job.walkerId), "kind": .string(job.kind),
            "state": .string(job.state.rawValue), "attempts": .int(job.attempts), "maxAttempts": .int(job.maxAttempts),
            "runAt": .string(InstantParser.format(job.runAt)),
            "lastError": job.lastError.map(JSONValue.string) ?? .null,
            "createdAt": .string(InstantParser.format(job.createdAt)),
        ])
    }
}
