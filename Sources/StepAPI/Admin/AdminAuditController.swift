import Foundation
import Hummingbird
import StepAttestation
import StepCore
import StepStore

/// `GET /admin/audit?operator=&action=&limit=&cursor=`: the admin audit, newest first, a page at a time (`read`).
struct AdminAuditController: Sendable {
    static let route = "/admin/audit"
    static let defaultLimit = 50
    static let maxLimit = 200

    let store: Store

    func register(in group: RouterGroup<AppRequestContext>, catalog: inout RouteCatalog) {
        group.on(.get, Self.route, catalog: &catalog) { request, context in
            _ = try context.requireAdmin(.read)
            return try await audit(request.uri.queryParameters)
        }
    }

    private func audit(_ parameters: Parameters) async throws -> Response {
        let query = try AuditQuery.decode(parameters)
        let records = try await store.read(.instance) {
            try await $0.auditRecords(
                operatorName: query.operatorName, action: query.action, before: query.cursor, limit: query.limit + 1)
        }
        let page = records.prefix(query.limit)
        let more = records.count > query.limit
        let body: JSONValue = .object([
            "items": .array(page.map(Self.item)),
            "nextCursor": more ? page.last.map { .string(AuditQuery.cursor(after: $0)) } ?? .null : .null,
        ])
        return AdminController.json(.ok, body)
    }

    static func item(_ record: AdminAuditRecord) -> JSONValue {
        .object([
            "id": .string(record.id), "at": .string(InstantParser.format(record.at)),
            "operator": .string(record.actor.name), "role": .string(record.actor.role.rawValue),
            "action": .string(record.action), "target": .string(record.target), "outcome": .string(record.outcome),
            "note": record.note.map(JSONValue.string) ?? .null,
        ])
    }
}

/// The audit list's parameters; a bad one is a 400 naming it.
struct AuditQuery: Sendable {
    var operatorName: String?
    var action: String?
    var cursor: (at: Int, id: String)?
    var limit = AdminAuditController.defaultLimit

    static func decode(_ parameters: Parameters) throws(AdminAPIError) -> AuditQuery {
        var query = AuditQuery()
        if let name = parameters.repeated(among: ["operator", "action", "limit", "cursor"]) {
            throw AdminAPIError.badRequest("\(name) must be given once.")
        }
        if let name = parameters.get("operator") {
            guard OperatorName.isValid(name) else {
                throw AdminAPIError.badRequest("operator must be an operator's name (1 to 64 of A-Z a-z 0-9 . _ -).")
            }
            query.operatorName = name
        }
        if let action = parameters.get("action") {
            guard (1...64).contains(action.unicodeScalars.count) else {
                throw AdminAPIError.badRequest("action must be an action's name, such as review.accept.")
            }
            query.action = action
        }
        if let text = parameters.get("limit") {
            guard let limit = Int(text), (1...AdminAuditController.maxLimit).contains(limit) else {
                throw AdminAPIError.badRequest("limit must be an integer from 1 to \(AdminAuditController.maxLimit).")
            }
            query.limit = limit
        }
        if let text = parameters.get("cursor") {
            guard let cursor = KeysetCursor(text: text, list: .audit) else {
                throw AdminAPIError.badRequest("cursor must be the nextCursor of an earlier page.")
            }
            query.cursor = (cursor.milliseconds, cursor.id)
        }
        return query
    }

    static func cursor(after record: AdminAuditRecord) -> String {
        KeysetCursor(record.at, id: record.id, list: .audit).text
    }
}
