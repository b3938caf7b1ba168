import Crypto
import Foundation
import SQLKit
import StepDatabase

/// What an operator may do at the admin API. Each route names the one permission it needs.
package enum AdminPermission: String, Sendable, Hashable, CaseIterable {
    /// Lists, an entry's detail without claiming it, jobs, metrics, the audit.
    case read
    /// Claim and decide review entries one at a time, reverse an accepted day, suspend or reinstate a walker.
    case decide
    /// Decide many review entries in one request.
    case bulkDecide
    /// Retry or discard dead jobs.
    case manageJobs
}

/// An operator credential's role: each role holds the permissions of the one before it and more.
package enum OperatorRole: String, Sendable, Hashable, CaseIterable {
    case viewer
    case reviewer
    case `operator`

    package func permits(_ permission: AdminPermission) -> Bool {
        switch permission {
        case .read: true
        case .decide: self != .viewer
        case .bulkDecide, .manageJobs: self == .operator
        }
    }
}

/// Who asks the admin API: a named operator, or the bootstrap `admin.token`.
package struct AdminActor: Sendable, Hashable {
    package var id: String
    package var name: String
    package var role: OperatorRole

    package init(id: String, name: String, role: OperatorRole) {
        self.id = id
        self.name = name
        self.role = role
    }

    /// The configured `admin.token`: an operator with every permission, named `admin` in the audit.
    package static let bootstrap = AdminActor(id: "bootstrap", name: "admin", role: .operator)

    /// Who `stepd operator create` and `stepd operator revoke` act as in the audit: the command line, which only
    /// someone holding the database's credentials can run.
    package static let commandLine = AdminActor(id: "cli", name: "stepd", role: .operator)
}

/// What an operator may be called: 1 to 64 of `A-Z a-z 0-9 . _ -`, so a name is safe in a log line, a table and a
/// URL without quoting.
package enum OperatorName {
    package static let maxLength = 64

    package static func isValid(_ name: String) -> Bool {
        (1...maxLength).contains(name.utf8.count)
            && name.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                    true
                default: false
                }
            }
    }
}

/// One operator credential as stored: the secret itself is never kept, only its digest.
package struct OperatorRecord: Sendable, Hashable {
    package var id: String
    package var name: String
    package var role: OperatorRole
    package var createdAt: Date
    package var revokedAt: Date?

    package var actor: AdminActor { AdminActor(id: id, name: name, role: role) }
}

/// How an operator's secret is kept: the hex SHA-256 of its UTF-8 bytes. Secrets are 256-bit random values, so a
/// slow password hash would add nothing, and an exact digest lets an index find the credential.
package enum OperatorSecret {
    package static func digest(_ secret: String) -> String {
        SHA256.hash(data: Array(secret.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}

extension StoreTransaction {
    /// Stores a new active operator; nil when an active operator already has the name.
    package func createOperator(name: String, role: OperatorRole, secretDigest: String, at now: Date) async throws
        -> OperatorRecord?
    {
        let id = Self.newID()
        let row = try await sql.raw(
            """
            INSERT INTO operators (operator_id, name, role, secret_digest, created_at)
            SELECT \(bind: id), \(bind: name), \(bind: role.rawValue), \(bind: secretDigest),
                \(bind: now.millisecondsSince1970)
            WHERE NOT EXISTS (SELECT 1 FROM operators WHERE name = \(bind: name) AND revoked_at IS NULL)
            RETURNING \(unsafeRaw: Self.operatorColumns)
            """
        ).first()
        return try row.map(Self.operatorRecord)
    }

    /// Revokes the active operator of that name and ends its console sessions; nil when there is none.
    package func revokeOperator(name: String, at now: Date) async throws -> OperatorRecord? {
        let row = try await sql.raw(
            """
            UPDATE operators SET revoked_at = \(bind: now.millisecondsSince1970)
            WHERE name = \(bind: name) AND revoked_at IS NULL
            RETURNING \(unsafeRaw: Self.operatorColumns)
            """
        ).first()
        guard let revoked = try row.map(Self.operatorRecord) else { return nil }
        try await endSessions(operatorId: revoked.id, at: now)
        return revoked
    }

    /// The active operator whose secret has this digest.
    package func activeOperator(secretDigest: String) async throws -> OperatorRecord? {
        let row = try await sql.raw(
            """
            SELECT \(unsafeRaw: Self.operatorColumns) FROM operators
            WHERE secret_digest = \(bind: secretDigest) AND revoked_at IS NULL
            """
        ).first()
        return try row.map(Self.operatorRecord)
    }

    /// Every operator ever created, revoked ones included, by name (bytewise, so both engines list them in one
    /// order: PostgreSQL would otherwise sort by the database's collation, ignoring case and punctuation first) then
    /// creation.
    package func operators() async throws -> [OperatorRecord] {
        let bytewise: SQLText = kind == .postgres ? " COLLATE \"C\"" : ""
        return try await sql.raw(
            "SELECT \(unsafeRaw: Self.operatorColumns) FROM operators ORDER BY name\(bytewise), created_at, operator_id"
        ).all().map(Self.operatorRecord)
    }

    private static let operatorColumns = "operator_id, name, role, created_at, revoked_at"

    private static func operatorRecord(_ row: any SQLRow) throws -> OperatorRecord {
        let roleText = try row.decode(column: "role", as: String.self)
        guard let role = OperatorRole(rawValue: roleText) else {
            throw StoreError.corrupt("unknown operator role \(roleText)")
        }
        return OperatorRecord(
            id: try row.decode(column: "operator_id", as: String.self),
            name: try row.decode(column: "name", as: String.self),
            role: role,
            createdAt: Date(millisecondsSince1970: try row.decode(column: "created_at", as: Int.self)),
            revokedAt: try row.decode(column: "revoked_at", as: Int?.self).map(Date.init(millisecondsSince1970:)))
    }
}
