import Foundation
import Hummingbird
import Logging
import StepCore
import StepJobs
import StepStore

/// The actions a reviewer takes on a walker under `/admin/walkers/`: look at one, reverse one of their accepted
/// days, suspend and reinstate them. Each change writes its audit row in its own transaction and one log line.
struct AdminWalkerController: Sendable {
    static let walkerRoute = "/admin/walkers/{walkerId}"
    static let reverseRoute = "/admin/walkers/{walkerId}/days/{day}/reverse"
    static let suspendRoute = "/admin/walkers/{walkerId}/suspend"
    static let reinstateRoute = "/admin/walkers/{walkerId}/reinstate"

    let reverser: DayReverser
    let clock: @Sendable () -> Date
    let logger: Logger

    var store: Store { reverser.store }

    func register(in group: RouterGroup<AppRequestContext>, catalog: inout RouteCatalog) {
        group.on(.get, Self.walkerRoute, catalog: &catalog) { _, context in
            _ = try context.requireAdmin(.read)
            return try await walker(try Self.walkerId(context))
        }
        group.on(.post, Self.reverseRoute, catalog: &catalog) { request, context in
            let actor = try context.requireAdmin(.decide)
            return try await reverse(
                request, walkerId: try Self.walkerId(context), day: context.parameters.get("day"),
                actor: actor)
        }
        group.on(.post, Self.suspendRoute, catalog: &catalog) { request, context in
            let actor = try context.requireAdmin(.decide)
            return try await setSuspension(request, walkerId: try Self.walkerId(context), suspended: true, actor: actor)
        }
        group.on(.post, Self.reinstateRoute, catalog: &catalog) { request, context in
            let actor = try context.requireAdmin(.decide)
            return try await setSuspension(
                request, walkerId: try Self.walkerId(context), suspended: false, actor: actor)
        }
    }

    /// The walker id of the path, percent-decoded: the router matches and hands back the path as sent, and a
    /// walker's id is the session token's `sub`, which may hold any character (`auth0|…`, an e-mail address).
    private static func walkerId(_ context: AppRequestContext) throws -> String {
        guard let decoded = (context.parameters.get("walkerId") ?? "").removingPercentEncoding else {
            throw AdminAPIError.badRequest("The walker id in the path is not valid percent-encoding.")
        }
        return decoded
    }

    // MARK: Routes

    private func walker(_ walkerId: String) async throws -> Response {
        guard let view = try await store.withoutTransaction({ try await $0.adminWalker(walkerId) }) else {
            throw AdminAPIError.notFound("No walker has this id.")
        }
        return AdminController.json(.ok, Self.item(view))
    }

    private func reverse(_ request: Request, walkerId: String, day dayText: String?, actor: AdminActor)
        async throws -> Response
    {
        guard let dayText, let day = LocalDate(iso: dayText) else {
            throw AdminAPIError.badRequest("day must be a date YYYY-MM-DD.")
        }
        let note = try await AdminRequestBody.read(request).note()
        switch try await reverser.reverse(walkerId: walkerId, day: day, note: note, by: actor, now: clock()) {
        case .reversed(let reversedEnergy):
            logger.adminAction(
                actor, action: DayReverser.action, target: "\(walkerId)/\(day)", outcome: "decided", note: note,
                walkerId: walkerId)
            return AdminController.json(
                .ok,
                .object([
                    "walkerId": .string(walkerId), "day": .string(day.description),
                    "status": .string(ReconciliationStatus.rejected.rawValue),
                    "reversedEnergy": .int(reversedEnergy),
                ]))
        case .notFound:
            throw AdminAPIError.notFound("The walker has no such day.")
        case .notAccepted(let status):
            throw AdminAPIError.conflict(
                code: "NOT_ACCEPTED",
                message: "Only an ACCEPTED day, or a REJECTED one that still holds credit, can be reversed.",
                details: ["status": .string(status.rawValue)])
        }
    }

    private func setSuspension(_ request: Request, walkerId: String, suspended: Bool, actor: AdminActor)
        async throws -> Response
    {
        let note = try await AdminRequestBody.read(request).note()
        let action = suspended ? "walker.suspend" : "walker.reinstate"
        let now = clock()
        let view: AdminWalkerView? = try await store.transaction { tx in
            guard try await tx.walker(walkerId) != nil else { return nil }
            // The erasure's suspension keeps ingests off the pseudonym (a token with it as `sub` would credit the
            // erased record): no reinstatement undoes it.
            if !suspended, try await tx.isErasedRecord(walkerId) {
                throw AdminAPIError.conflict(
                    code: "WALKER_ERASED", message: "An erased walker's record stays suspended.", details: [:])
            }
            guard try await tx.setSuspension(walkerId: walkerId, suspended: suspended, note: note, at: now) else {
                throw AdminAPIError.conflict(
                    code: "NO_CHANGE",
                    message: suspended ? "The walker is suspended already." : "The walker is not suspended.",
                    details: ["suspended": .bool(suspended)])
            }
            try await tx.recordAudit(
                actor: actor, action: action, target: walkerId, outcome: suspended ? "suspended" : "reinstated",
                note: note, at: now)
            return try await tx.adminWalker(walkerId)
        }
        guard let view else { throw AdminAPIError.notFound("No walker has this id.") }
        logger.adminAction(
            actor, action: action, target: walkerId, outcome: suspended ? "suspended" : "reinstated", note: note,
            walkerId: walkerId)
        return AdminController.json(.ok, Self.item(view))
    }

    // MARK: Bodies

    static func item(_ view: AdminWalkerView) -> JSONValue {
        .object([
            "id": .string(view.walkerId), "suspended": .bool(view.suspendedAt != nil),
            "suspendedAt": view.suspendedAt.map { .string(InstantParser.format($0)) } ?? .null,
            "suspensionNote": view.suspensionNote.map(JSONValue.string) ?? .null,
            "lifetimeSteps": .int(view.lifetimeSteps),
            "energy": .object(["confirmed": .int(view.confirmedEnergy), "pending": .int(view.pendingEnergy)]),
            "openReviews": .int(view.openReviews),
        ])
    }
}
