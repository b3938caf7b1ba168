import Foundation
import StepAttestation
import StepStore

/// Creating and revoking named operators (`stepd operator`), each with its audit row in the same transaction.
/// The command line acts as `AdminActor.commandLine` (`stepd`): whoever runs it holds the database's credentials.
package enum OperatorAccounts {
    /// What `create` did.
    package enum Creation: Sendable {
        /// The operator and its secret, which exists only in this value: the store keeps its digest.
        case created(OperatorRecord, secret: String)
        case invalidName
        /// The name of an actor that is no named operator (`admin`, the bootstrap token's; `stepd`, the command
        /// line's): the audit, the metrics and the console's claims tell operators apart by name.
        case nameReserved
        case nameTaken
    }

    /// The prefix of every operator secret, so a leaked one is recognisable (in a paste, by a secret scanner).
    package static let secretPrefix = "slo_"

    /// A new operator secret: the prefix and 32 random bytes in base64url.
    package static func newSecret() -> String { secretPrefix + randomToken() }

    /// 32 random bytes from the system's generator, in base64url: a secret, or a console session's cookie value.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64URL.encode((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }

    package static func create(store: Store, name: String, role: OperatorRole, now: Date) async throws -> Creation {
        guard OperatorName.isValid(name) else { return .invalidName }
        guard ![AdminActor.bootstrap.name, AdminActor.commandLine.name].contains(name) else { return .nameReserved }
        let secret = newSecret()
        // Two creations of one name at once: on PostgreSQL both find no active holder and the second insert meets the
        // first's unique key; run again, it finds the name taken, as it would have on SQLite.
        let made = try await store.transactionRerunOnConflict { tx -> OperatorRecord? in
            guard
                let record = try await tx.createOperator(
                    name: name, role: role, secretDigest: OperatorSecret.digest(secret), at: now)
            else { return nil }
            try await tx.recordAudit(
                actor: .commandLine, action: "operator.create", target: name, outcome: role.rawValue, note: nil,
                at: now)
            return record
        }
        guard let made else { return .nameTaken }
        return .created(made, secret: secret)
    }

    /// Revokes the active operator of that name (its secret and console sessions stop working at once); nil when
    /// there is none.
    package static func revoke(store: Store, name: String, now: Date) async throws -> OperatorRecord? {
        try await store.transaction { tx in
            guard let revoked = try await tx.revokeOperator(name: name, at: now) else { return nil }
            try await tx.recordAudit(
                actor: .commandLine, action: "operator.revoke", target: name, outcome: "revoked", note: nil, at: now)
            return revoked
        }
    }
}
