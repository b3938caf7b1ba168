import Foundation
import Hummingbird
import Logging
import StepCore
import StepDatabase
import StepJobs
import StepStore

/// The operators' API under `/admin/`: the review queue, behind `AdminAuthMiddleware` (the job queue is
/// `AdminJobsController`'s).
struct AdminController: Sendable {
    static let reviewsRoute = "/admin/reviews"
    static let reviewRoute = "/admin/reviews/{id}"
    static let claimRoute = "/admin/reviews/{id}/claim"
    static let releaseRoute = "/admin/reviews/{id}/release"
    static let resolveRoute = "/admin/reviews/{id}/resolve"
    static let bulkRoute = "/admin/reviews/bulk"

    let resolver: ReviewResolver
    /// How long opening or claiming an entry holds it (`admin.claimSeconds`).
    var claimSeconds = 900
    let clock: @Sendable () -> Date
    let logger: Logger

    func register(in group: RouterGroup<AppRequestContext>, catalog: inout RouteCatalog) {
        group.on(.get, Self.reviewsRoute, catalog: &catalog) { request, context in
            _ = try context.requireAdmin(.read)
            return try await reviews(request)
        }
        group.on(.post, Self.bulkRoute, catalog: &catalog) { request, context in
            try await bulk(request, actor: context.requireAdmin(.bulkDecide), requestId: context.requestId)
        }
        group.on(.get, Self.reviewRoute, catalog: &catalog) { request, context in
            try await detail(request, id: context.parameters.get("id") ?? "", actor: context.requireAdmin(.read))
        }
        group.on(.post, Self.claimRoute, catalog: &catalog) { _, context in
            try await claim(id: context.parameters.get("id") ?? "", actor: context.requireAdmin(.decide))
        }
        group.on(.post, Self.releaseRoute, catalog: &catalog) { _, context in
            try await release(id: context.parameters.get("id") ?? "", actor: context.requireAdmin(.decide))
        }
        group.on(.post, Self.resolveRoute, catalog: &catalog) { request, context in
            try await resolve(request, id: context.parameters.get("id") ?? "", actor: context.requireAdmin(.decide))
        }
    }

    // MARK: Routes

    private func reviews(_ request: Request) async throws -> Response {
        let query = try ReviewListRequest.query(request.uri.queryParameters)
        // A list may come from a read replica that has every write made through this instance.
        let page = try await resolver.store.read(.instance) { try await $0.reviewPage(query) }
        let now = clock()
        return Self.json(
            .ok,
            .object([
                "items": .array(page.entries.map { Self.item($0, now: now) }),
                "nextCursor": page.next.map { .string(ReviewListRequest.cursor($0, for: query)) } ?? .null,
            ]))
    }

    /// The entry with its evidence and walker; opening an open entry claims it for a caller who may decide,
    /// unless `claim=false`, someone else holds it, or a browser marks the request as coming from another site (a
    /// GET passes the same-origin rule, so a page elsewhere on the site must not be able to claim through it).
    private func detail(_ request: Request, id: String, actor: AdminActor) async throws -> Response {
        var claiming = actor.role.permits(.decide) && !SameOriginMiddleware.isCrossSite(request)
        if request.uri.queryParameters.repeated(among: ["claim"]) != nil {
            throw AdminAPIError.badRequest("claim must be given once.")
        }
        if let text = request.uri.queryParameters.get("claim") {
            guard text == "true" || text == "false" else {
                throw AdminAPIError.badRequest("claim must be true or false.")
            }
            claiming = claiming && text == "true"
        }
        let now = clock()
        guard var entry = try await resolver.store.withoutTransaction({ try await $0.review(id: id) }) else {
            throw AdminAPIError.notFound("No review entry has this id.")
        }
        if claiming, entry.isOpen {
            switch try await resolver.claim(id: id, by: actor, seconds: claimSeconds, now: now) {
            case .claimed(let claimed, let taken):
                entry = claimed
                if taken {
                    logger.adminAction(
                        actor, action: "review.claim", target: id, outcome: "claimed", note: nil,
                        walkerId: entry.walkerId)
                }
            case .heldByOther, .alreadyResolved, .notFound: break
            }
        }
        let shown = entry
        let evidence = try await resolver.store.withoutTransaction { try await $0.reviewEvidence(for: shown, now: now) }
        return Self.json(
            .ok,
            .object([
                "entry": Self.item(entry, now: now),
                "evidence": ReviewDeskJSON.evidence(evidence),
                "walker": ReviewDeskJSON.walker(id: entry.walkerId, evidence.walker),
            ]))
    }

    private func claim(id: String, actor: AdminActor) async throws -> Response {
        let now = clock()
        switch try await resolver.claim(id: id, by: actor, seconds: claimSeconds, now: now) {
        case .claimed(let entry, let taken):
            if taken {
                logger.adminAction(
                    actor, action: "review.claim", target: id, outcome: "claimed", note: nil, walkerId: entry.walkerId)
            }
            return Self.json(.ok, Self.item(entry, now: now))
        case .heldByOther(let claim): throw Self.claimed(claim)
        case .alreadyResolved: throw AdminAPIError.alreadyResolved
        case .notFound: throw AdminAPIError.notFound("No review entry has this id.")
        }
    }

    private func release(id: String, actor: AdminActor) async throws -> Response {
        let now = clock()
        switch try await resolver.release(id: id, by: actor, now: now) {
        case .released(let entry):
            logger.adminAction(
                actor, action: "review.release", target: id, outcome: "released", note: nil, walkerId: entry.walkerId)
            return Self.json(.ok, Self.item(entry, now: now))
        case .notClaimed(let entry): return Self.json(.ok, Self.item(entry, now: now))
        case .heldByOther(let claim): throw Self.claimed(claim)
        case .alreadyResolved: throw AdminAPIError.alreadyResolved
        case .notFound: throw AdminAPIError.notFound("No review entry has this id.")
        }
    }

    private func resolve(_ request: Request, id: String, actor: AdminActor) async throws -> Response {
        let fields = try await AdminRequestBody.read(request).fields
        let (decision, note) = try Self.decisionAndNote(fields)
        var seen: String?
        if let value = fields["evidenceVersion"] {
            guard case .string(let version) = value, !version.isEmpty, version.unicodeScalars.count <= 200 else {
                throw AdminAPIError.badRequest(
                    "evidenceVersion must be the evidence.version of the entry as it was shown (a string).")
            }
            seen = version
        }
        let now = clock()
        switch try await resolver.resolve(
            id: id, decision: decision, note: note, by: actor, now: now, evidenceSeen: seen)
        {
        case .resolved(let entry):
            logger.adminAction(
                actor, action: "review.\(decision.rawValue)", target: entry.id, outcome: "decided", note: note,
                walkerId: entry.walkerId)
            return Self.json(.ok, Self.item(entry, now: now))
        case .notFound:
            throw AdminAPIError.notFound("No review entry has this id.")
        case .alreadyResolved:
            throw AdminAPIError.alreadyResolved
        case .claimed(let claim):
            throw Self.claimed(claim)
        case .evidenceChanged(let current):
            throw AdminAPIError.conflict(
                code: "EVIDENCE_CHANGED",
                message: "The day's submissions changed since the entry was shown; look again before deciding.",
                details: ["evidenceVersion": .string(current)])
        }
    }

    /// Decides each id in its own transaction through the one resolver, in the order given; an id decided
    /// before (by this request sent again, or anyone) answers `already_resolved`.
    private func bulk(_ request: Request, actor: AdminActor, requestId: String) async throws -> Response {
        let body = try await AdminRequestBody.read(request)
        let fields = body.fields
        let ids = try body.bulkIds(of: "entry")
        let (decision, note) = try Self.decisionAndNote(fields)
        var items: [JSONValue] = []
        for id in ids {
            let now = clock()
            let outcome: String
            var entry: JSONValue = .null
            let resolution: ReviewResolver.Outcome
            do {
                resolution = try await resolver.resolve(id: id, decision: decision, note: note, by: actor, now: now)
            } catch {
                throw AdminAPIError.bulk(
                    error, applied: items, total: ids.count, requestId: requestId, logger: logger)
            }
            switch resolution {
            case .resolved(let resolved):
                logger.adminAction(
                    actor, action: "review.\(decision.rawValue)", target: id, outcome: "decided", note: note,
                    walkerId: resolved.walkerId)
                outcome = "decided"
                entry = Self.item(resolved, now: now)
            case .alreadyResolved(let resolved):
                outcome = "already_resolved"
                entry = Self.item(resolved, now: now)
            case .claimed: outcome = "claimed"
            case .notFound: outcome = "not_found"
            // Bulk decisions send no evidence version: they are made from the queue, not from what an entry showed.
            case .evidenceChanged: outcome = "evidence_changed"
            }
            items.append(.object(["id": .string(id), "outcome": .string(outcome), "entry": entry]))
        }
        return Self.json(.ok, .object(["items": .array(items)]))
    }

    private static func decisionAndNote(_ fields: [String: JSONValue]) throws(AdminAPIError) -> (ReviewDecision, String)
    {
        guard case .string(let decisionText) = fields["decision"], let decision = ReviewDecision(rawValue: decisionText)
        else {
            throw AdminAPIError.badRequest("decision must be accept or reject.")
        }
        return (decision, try AdminRequestBody(fields: fields).note())
    }

    /// 409 `CLAIMED`, naming who holds the entry and until when.
    static func claimed(_ claim: ReviewClaim) -> AdminAPIError {
        .conflict(
            code: "CLAIMED", message: "Another operator holds a claim on this review entry.",
            details: [
                "operator": .string(claim.operatorName), "until": .string(InstantParser.format(claim.until)),
            ])
    }

    // MARK: Bodies

    /// An entry as the API shows it; its claim only while it holds at `now`.
    static func item(_ entry: ReviewEntry, now: Date) -> JSONValue {
        var fields: [String: JSONValue] = [
            "id": .string(entry.id), "walkerId": .string(entry.walkerId), "kind": .string(entry.kind.rawValue),
            "day": entry.day.map { .string($0.description) } ?? .null,
            "reasons": .array(entry.reasons.map(JSONValue.string)),
            "openedAt": .string(InstantParser.format(entry.openedAt)),
            "status": .string(entry.isOpen ? "open" : "resolved"),
            "energyAtStake": .int(entry.energyAtStake),
            "claim": entry.liveClaim(at: now).map {
                .object(["operator": .string($0.operatorName), "until": .string(InstantParser.format($0.until))])
            } ?? .null,
        ]
        if let reread = entry.reread, let value = JSONReader.read(Array(reread.utf8)) {
            fields["reread"] = value
        }
        if let resolvedAt = entry.resolvedAt {
            fields["resolvedAt"] = .string(InstantParser.format(resolvedAt))
            fields["decision"] = entry.decision.map { .string($0.rawValue) } ?? .null
            fields["note"] = entry.note.map(JSONValue.string) ?? .null
            fields["decidedBy"] = entry.decidedBy.map(JSONValue.string) ?? .null
        }
        return .object(fields)
    }

    static func json(_ status: HTTPResponse.Status, _ value: JSONValue) -> Response {
        .json(status: status, body: (try? JSONCoding.encode(value)) ?? "{}")
    }
}
