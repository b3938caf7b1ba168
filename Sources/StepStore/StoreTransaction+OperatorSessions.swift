import Foundation
import SQLKit
import StepDatabase

/// A live console session as the store finds it: who signed in, and until when.
package struct OperatorSession: Sendable, Hashable {
    package var actor: AdminActor
    package var expiresAt: Date
    /// For a bootstrap session, which `admin.token` opened it (`BearerSecret.sessionBinding`); nil otherwise,
    /// and for a bootstrap session opened before sessions were bound.
    package var credentialBinding: String? = nil
}

extension StoreTransaction {
    /// Stores a console session under the digest of its cookie value, for `actor` (a named operator, or the
    /// bootstrap `admin`) until `expiresAt`. Sessions that ended before `now` are removed on the way.
    /// `credentialBinding` names the `admin.token` a bootstrap session signed in with.
    package func createSession(
        digest: String, actor: AdminActor, credentialBinding: String? = nil, at now: Date, expiresAt: Date
    ) async throws {
        try await sql.raw(
            "DELETE FROM operator_sessions WHERE expires_at <= \(bind: now.millisecondsSince1970)"
        ).run()
        try await sql.raw(
            """
            INSERT INTO operator_sessions (session_digest, operator_id, created_at, expires_at, credential_binding)
            VALUES (\(bind: digest), \(bind: actor.id), \(bind: now.millisecondsSince1970),
                \(bind: expiresAt.millisecondsSince1970), \(bind: credentialBinding))
            """
        ).run()
    }

    /// The sessions among `digests` (a request may carry several values of the cookie), by digest, in one
    /// statement, that have neither expired nor been ended and whose operator is still active. A bootstrap session
    /// answers as `AdminActor.bootstrap` with the binding of the token it signed in with; whether that token is still
    /// the configured one is the caller's to check.
    package func activeSessions(digests: [String], now: Date) async throws -> [String: OperatorSession] {
        guard !digests.isEmpty else { return [:] }
        let query: SQLText = """
            SELECT s.session_digest, s.operator_id, s.expires_at, s.credential_binding, o.name, o.role
            FROM operator_sessions s
            LEFT JOIN operators o ON o.operator_id = s.operator_id AND o.revoked_at IS NULL
            WHERE s.session_digest IN (\(binds: digests)) AND s.revoked_at IS NULL
                AND s.expires_at > \(bind: now.millisecondsSince1970)
            """
        var sessions: [String: OperatorSession] = [:]
        for row in try await sql.raw(query).all() {
            let digest = try row.decode(column: "session_digest", as: String.self)
            let expiresAt = Date(millisecondsSince1970: try row.decode(column: "expires_at", as: Int.self))
            let operatorId = try row.decode(column: "operator_id", as: String.self)
            if operatorId == AdminActor.bootstrap.id {
                sessions[digest] = OperatorSession(
                    actor: .bootstrap, expiresAt: expiresAt,
                    credentialBinding: try row.decode(column: "credential_binding", as: String?.self))
                continue
            }
            guard let name = try row.decode(column: "name", as: String?.self),
                let roleText = try row.decode(column: "role", as: String?.self)
            else { continue }
            guard let role = OperatorRole(rawValue: roleText) else {
                throw StoreError.corrupt("unknown operator role \(roleText)")
            }
            sessions[digest] = OperatorSession(
                actor: AdminActor(id: operatorId, name: name, role: role), expiresAt: expiresAt)
        }
        return sessions
    }

    /// Ends the sessions with these digests (sign-out: every value of the cookie a request carries) in one
    /// statement; returns how many were live.
    @discardableResult
    package func endSessions(digests: [String], at now: Date) async throws -> Int {
        guard !digests.isEmpty else { return 0 }
        return try await sql.raw(
            """
            UPDATE operator_sessions SET revoked_at = \(bind: now.millisecondsSince1970)
            WHERE revoked_at IS NULL AND session_digest IN (\(binds: digests))
            RETURNING session_digest
            """
        ).all().count
    }

    /// Ends every session of the operator with this id (revocation).
    package func endSessions(operatorId: String, at now: Date) async throws {
        try await sql.raw(
            """
            UPDATE operator_sessions SET revoked_at = \(bind: now.millisecondsSince1970)
            WHERE operator_id = \(bind: operatorId) AND revoked_at IS NULL
            """
        ).run()
    }
}
