import Foundation
import StepAttestation
import StepDatabase
import StepStore

/// The development App Attest CA that a test-phase server trusts beside the configured root and `stepd device
/// attest` issues from. Generated on first use and kept in the database, like the development JWT key, so every
/// instance and command on the same database agrees without any set-up.
///
/// Whoever holds it can attest any key, so callers load it in test-phase only; production never asks for it.
package enum DevelopmentAppAttestCA {
    static let secretName = "appattest.development-ca"

    package static func loadOrCreate(store: Store, now: Date = Date()) async throws -> AppAttestDevelopmentAuthority {
        let candidate = try AppAttestDevelopmentAuthority.generate(now: now).pemEncoded
        let stored = try await store.transaction { tx in
            try await tx.serviceSecret(named: secretName, candidate: candidate, now: now)
        }
        do {
            return try AppAttestDevelopmentAuthority(pemEncoded: stored)
        } catch {
            throw StoreError.corrupt("the stored development App Attest CA cannot be read: \(error)")
        }
    }
}
