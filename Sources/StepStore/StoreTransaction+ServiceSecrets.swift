import Foundation
import SQLKit
import StepDatabase

extension StoreTransaction {
    /// The secret stored under `name`, created from `candidate` by the first instance that asks. Every
    /// instance and command on the same database gets the same value, whichever directory it runs in.
    package func serviceSecret(named name: String, candidate: String, now: Date) async throws -> String {
        try await sql.raw(
            """
            INSERT INTO service_secrets (name, secret, created_at)
            VALUES (\(bind: name), \(bind: candidate), \(bind: now.millisecondsSince1970))
            ON CONFLICT (name) DO NOTHING
            """
        ).run()
        guard
            let row = try await sql.raw("SELECT secret FROM service_secrets WHERE name = \(bind: name)").first()
        else { throw StoreError.corrupt("service secret \(name) vanished after it was stored") }
        return try row.decode(column: "secret", as: String.self)
    }
}
