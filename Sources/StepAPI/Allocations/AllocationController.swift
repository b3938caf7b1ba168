import Foundation
import HTTPTypes
import Hummingbird
import Logging
import StepAttestation
import StepCore
import StepStore

/// Spending Energy (SPEC.md "Energy, allocations and refunds"): `POST /walker/allocations` spends,
/// `GET /walker/allocations` lists, `GET /walker/ledger` shows every entry behind the balance. Same
/// authentication, envelope and per-walker limit as `GET /walker`.
struct AllocationController: Sendable {
    static let allocationsRoute = "/walker/allocations"
    static let ledgerRoute = "/walker/ledger"
    static let listLimit = 100

    let runner: WalkerReadRunner
    let mode: ServiceMode
    let maxBodyBytes: Int
    let idempotencyLeaseSeconds: Double

    func register(in group: RouterGroup<AppRequestContext>, catalog: inout RouteCatalog) {
        group.on(.post, Self.allocationsRoute, catalog: &catalog, use: allocate)
        group.on(.get, Self.allocationsRoute, catalog: &catalog, use: list)
        group.on(.get, Self.ledgerRoute, catalog: &catalog, use: ledger)
    }

    // MARK: - POST /walker/allocations

    /// The spend is decided under the walker's lock, in one transaction with the admission, the key's claim and
    /// its stored answer: two allocations can never both spend the same Energy, and a replay answers the
    /// bytes of the first, including a 422.
    func allocate(_ request: Request, context: AppRequestContext) async throws -> Response {
        let walkerId = try context.walker().walkerId
        let parsed = await JSONBody.read(request, maxBytes: maxBodyBytes, as: WalkerAPIError.self) {
            bytes throws(RequestValidationError) in try AllocationRequest.decode(bytes)
        }
        let writer = IdempotentWrite<WalkerAPIError>(
            store: runner.store, policy: runner.policy, leaseSeconds: idempotencyLeaseSeconds,
            keyReused: .body(.idempotencyKeyReused), inFlight: .body(.idempotencyInFlight))
        return try await writer.respond(walkerId: walkerId, parsed: parsed, now: runner.clock()) {
            [mode] tx, valid, now in
            try await Self.spend(valid, walkerId: walkerId, mode: mode, tx: tx, now: now)
        }
    }

    /// Spends `request.points` if confirmed plus pending Energy covers them (`StoreTransaction.spend`); in
    /// test-phase, where every day is accepted at once, the allocation is confirmed.
    private static func spend(
        _ request: AllocationRequest, walkerId: String, mode: ServiceMode, tx: StoreTransaction, now: Date
    ) async throws -> (HTTPResponse.Status, String) {
        _ = try await tx.lockWalker(walkerId, now: now)
        let outcome = try await tx.spend(
            walkerId: walkerId, id: StoreTransaction.newID(), kind: request.kind, nodeId: request.nodeId,
            points: request.points, confirmAtOnce: mode == .testPhase, now: now)
        switch outcome {
        case .spent(let allocation):
            return (.created, AllocationResponse.single(allocation))
        case .insufficient(let spendable):
            let error = IngestAPIError.insufficientEnergy(required: request.points, spendable: spendable)
            return (error.status, error.bodyString)
        }
    }

    // MARK: - GET /walker/allocations, GET /walker/ledger

    /// The newest `listLimit` allocations, or with `?status=` the newest of that status: an app reads its
    /// provisional ones so, however many it made since.
    func list(_ request: Request, context: AppRequestContext) async throws -> Response {
        let query = Result { () throws(RequestValidationError) in
            try Self.status(request.uri.queryParameters)
        }.mapError(WalkerAPIError.invalidQuery)
        return try await runner.respond(context: context, query: query) { tx, walkerId, _, status in
            .success(
                AllocationResponse.list(
                    try await tx.allocations(walkerId: walkerId, status: status, limit: Self.listLimit)))
        }
    }

    /// `status`, once, if given: `provisional`, `confirmed` or `refunded`.
    static func status(_ parameters: Parameters) throws(RequestValidationError) -> AllocationStatus? {
        if let name = parameters.repeated(among: ["status"]) {
            throw RequestValidationError(fields: [name: "must be given once"])
        }
        guard let text = parameters.get("status") else { return nil }
        guard let status = AllocationStatus(rawValue: text) else {
            throw RequestValidationError(fields: ["status": "must be provisional, confirmed or refunded"])
        }
        return status
    }

    func ledger(_ request: Request, context: AppRequestContext) async throws -> Response {
        let query = Result { () throws(RequestValidationError) in try LedgerQuery.decode(request.uri.queryParameters) }
            .mapError(WalkerAPIError.invalidQuery)
        return try await runner.respond(context: context, query: query) { tx, walkerId, _, query in
            // One more than the page, to know whether another follows.
            let entries = try await tx.ledgerEntries(walkerId: walkerId, before: query.cursor, limit: query.limit + 1)
            return .success(LedgerQuery.page(Array(entries.prefix(query.limit)), more: entries.count > query.limit))
        }
    }
}

/// `GET /walker/ledger?cursor=&limit=`: newest first; `cursor` is the `next` of the previous page.
struct LedgerQuery: Sendable {
    static let defaultLimit = 50
    static let maxLimit = 200

    var cursor: (createdAt: Int, id: String)?
    var limit: Int

    static func decode(_ parameters: Parameters) throws(RequestValidationError) -> LedgerQuery {
        var query = LedgerQuery(cursor: nil, limit: defaultLimit)
        if let name = parameters.repeated(among: ["limit", "cursor"]) {
            throw RequestValidationError(fields: [name: "must be given once"])
        }
        if let text = parameters.get("limit") {
            guard let limit = Int(text), (1...maxLimit).contains(limit) else {
                throw RequestValidationError(fields: ["limit": "must be an integer from 1 to \(maxLimit)"])
            }
            query.limit = limit
        }
        if let text = parameters.get("cursor") {
            guard let cursor = KeysetCursor(text: text, list: .ledger) else {
                throw RequestValidationError(fields: ["cursor": "must be the next cursor of an earlier page"])
            }
            query.cursor = (cursor.milliseconds, cursor.id)
        }
        return query
    }

    static func cursor(after entry: LedgerEntry) -> String {
        KeysetCursor(entry.createdAt, id: entry.id, list: .ledger).text
    }

    /// `{"entries": [{"allocationId", "amount", "createdAt", "day", "id", "kind"}], "next": cursor or null}`.
    static func page(_ entries: [LedgerEntry], more: Bool) -> String {
        JSONTextWriter.object(capacity: 64 + 160 * entries.count) { json in
            json.array("entries", entries) { json, entry in
                json.beginObject()
                json.member("allocationId", entry.allocationId)
                json.member("amount", entry.amount)
                json.member("createdAt", InstantParser.format(entry.createdAt, fractional: true))
                json.member("day", entry.day?.description)
                json.member("id", entry.id)
                json.member("kind", entry.kind.rawValue)
                json.endObject()
            }
            json.member("next", more ? entries.last.map(cursor(after:)) : nil)
        }
    }
}
