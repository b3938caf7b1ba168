import Foundation
import SQLKit
import StepDatabase

/// One row of the admin audit: who did what to which target, when, how it ended, and the note they gave.
package struct AdminAuditRecord: Sendable, Hashable {
    package var id: String
    package var at: Date
    package var actor: AdminActor
    /// `review.accept`, `job.retry`, …: the contract's action names.
    package var action: String
    /// What the action was about: a review entry's id, `walkerId/day`, a walker or a job id.
    package var target: String
    /// How it ended: `decided`, `retried`, `claimed`, `refused`, …
    package var outcome: String
    package var note: String?
}

extension StoreTransaction {
    /// Appends one audit row in the action's own transaction, so the row exists exactly when the action does.
    @discardableResult
    package func recordAudit(
        actor: AdminActor, action: String, target: String, outcome: String, note: String?, at now: Date
    ) async throws -> AdminAuditRecord {
        let record = AdminAuditRecord(
            id: Self.newID(), at: now, actor: actor, action: action, target: target, outcome: outcome, note: note)
        try await sql.raw(
            """
            INSERT INTO admin_audit (audit_id, at, operator_id, operator_name, role, action, target, outcome, note)
            VALUES (\(bind: record.id), \(bind: now.millisecondsSince1970), \(bind: actor.id), \(bind: actor.name),
                \(bind: actor.role.rawValue), \(bind: action), \(bind: target), \(bind: outcome), \(bind: note))
            """
        ).run()
        return record
    }

    /// The newest audit rows first, at most `limit`: only those of the operator named `operatorName` and of
    /// `action` when given, and only those after `before` (the last row of the previous page: its instant in
    /// milliseconds and its id), so a page costs the same however deep it is.
    package func auditRecords(
        operatorName: String? = nil, action: String? = nil, before cursor: (at: Int, id: String)? = nil, limit: Int
    ) async throws -> [AdminAuditRecord] {
        let byOperator: SQLText = operatorName.map { "AND operator_name = \(bind: $0)" } ?? ""
        let byAction: SQLText = action.map { "AND action = \(bind: $0)" } ?? ""
        let after: SQLText =
            cursor.map { "AND (at < \(bind: $0.at) OR (at = \(bind: $0.at) AND audit_id < \(bind: $0.id)))" } ?? ""
        return try await sql.raw(
            """
            SELECT audit_id, at, operator_id, operator_name, role, action, target, outcome, note FROM admin_audit
            WHERE 1 = 1 \(byOperator) \(byAction) \(after)
            ORDER BY at DESC, audit_id DESC LIMIT \(bind: limit)
            """
        ).all().map(Self.auditRecord)
    }

    static func auditRecord(_ row: any SQLRow) throws -> AdminAuditRecord {
        let roleText = try row.decode(column: "role", as: String.self)
        guard let role = OperatorRole(rawValue: roleText) else {
            throw StoreError.corrupt("unknown operator role \(roleText)")
        }
        return AdminAuditRecord(
            id: try row.decode(column: "audit_id", as: String.self),
            at: Date(millisecondsSince1970: try row.decode(column: "at", as: Int.self)),
            actor: AdminActor(
                id: try row.decode(column: "operator_id", as: String.self),
                name: try row.decode(column: "operator_name", as: String.self), role: role),
            action: try row.decode(column: "action", as: String.self),
            target: try row.decode(column: "target", as: String.self),
            outcome: try row.decode(column: "outcome", as: String.self),
            note: try row.decode(column: "note", as: String?.self))
    }
}
