import Foundation
import SQLKit
import StepDatabase

/// What issuing a nonce did: a new nonce, or nothing because the walker already holds the most it may.
package enum HealthNonceIssue: Sendable, Hashable {
    case issued(expiresAt: Date)
    /// The walker holds `maxLive` live nonces; the earliest of them expires at `retryAt`.
    case capped(retryAt: Date)
}

/// Why a nonce could not be consumed, in seed 002's order of checks; or that this caller consumed it.
package enum HealthNonceUse: Sendable, Hashable {
    case consumed
    /// Never issued, or issued to another walker: the two are indistinguishable to the caller on purpose.
    case unknown
    case alreadyUsed
    case expired
}

/// A walker's registered App Attest key (`app_attest_keys`).
package struct AppAttestKeyRecord: Sendable, Hashable {
    package var walkerId: String
    /// Base64 of the key id (SHA-256 of the public key).
    package var keyId: String
    /// Base64 of the X9.63 uncompressed P-256 public key.
    package var publicKey: String
    /// `teamId.bundleId` the attestation was made for.
    package var appId: String
    package var environment: String
    package var signCount: Int
    /// Base64 of the receipt as the attestation carried it, for a later refresh with Apple.
    package var receipt: String
    /// Whether the development CA (`stepd device`) attested the key, not the configured App Attest root: such a key
    /// counts only while the server trusts that CA (`app_attest_keys.authority`).
    package var development: Bool

    package init(
        walkerId: String, keyId: String, publicKey: String, appId: String, environment: String, signCount: Int,
        receipt: String, development: Bool = false
    ) {
        self.walkerId = walkerId
        self.keyId = keyId
        self.publicKey = publicKey
        self.appId = appId
        self.environment = environment
        self.signCount = signCount
        self.receipt = receipt
        self.development = development
    }
}

extension StoreTransaction {
    /// Stores `nonce` for the walker unless it already holds `maxLive` live (unused, unexpired) nonces. The
    /// caller holds the walker's lock (`lockWalker`), so concurrent requests cannot both pass the count.
    package func issueHealthNonce(
        walkerId: String, nonce: String, now: Date, lifetimeSeconds: Double, maxLive: Int
    ) async throws -> HealthNonceIssue {
        let at = now.millisecondsSince1970
        let live = try await sql.raw(Self.liveHealthNoncesStatement(walkerId, at: at)).first()
        if let live, try live.decode(column: "live", as: Int.self) >= maxLive {
            let earliest = try live.decode(column: "earliest", as: Int?.self) ?? at
            return .capped(retryAt: Date(millisecondsSince1970: earliest))
        }
        let expiresAt = now.addingTimeInterval(lifetimeSeconds)
        try await sql.raw(
            """
            INSERT INTO health_nonces (walker_id, nonce, created_at, expires_at, used_at)
            VALUES (\(bind: walkerId), \(bind: nonce), \(bind: at), \(bind: expiresAt.millisecondsSince1970), NULL)
            """
        ).run()
        return .issued(expiresAt: expiresAt)
    }

    /// How many live nonces the walker holds and when the first of them expires: a range of `health_nonces_live`
    /// (migration 26), the walker's unused nonces only, however many it has used in the day they are kept.
    static func liveHealthNoncesStatement(_ walkerId: String, at: Int) -> SQLText {
        """
        SELECT COUNT(*) AS live, MIN(expires_at) AS earliest FROM health_nonces
        WHERE walker_id = \(bind: walkerId) AND used_at IS NULL AND expires_at > \(bind: at)
        """
    }

    /// Marks the walker's `nonce` used if it is live, in one conditional update: of two requests presenting
    /// the same nonce, exactly one sees `.consumed` (PostgreSQL re-checks `used_at` after waiting for the
    /// other's row lock; SQLite has one writer). Otherwise says why, in seed 002's order.
    package func consumeHealthNonce(walkerId: String, nonce: String, now: Date) async throws -> HealthNonceUse {
        let at = now.millisecondsSince1970
        let consumed = try await sql.raw(
            """
            UPDATE health_nonces SET used_at = \(bind: at)
            WHERE walker_id = \(bind: walkerId) AND nonce = \(bind: nonce) AND used_at IS NULL
                AND expires_at > \(bind: at)
            RETURNING nonce
            """
        ).first()
        if consumed != nil { return .consumed }
        let row = try await sql.raw(
            """
            SELECT used_at, expires_at FROM health_nonces
            WHERE walker_id = \(bind: walkerId) AND nonce = \(bind: nonce)
            """
        ).first()
        guard let row else { return .unknown }
        if try row.decode(column: "used_at", as: Int?.self) != nil { return .alreadyUsed }
        return .expired
    }

    /// Whether the walker's `nonce` is still on record as used. A request that used a nonce before the walker was
    /// erased finds it gone (the erasure deletes every nonce of the walker), even when a later request of the same
    /// token has made the walker's row again: such a request must write nothing.
    package func holdsUsedHealthNonce(walkerId: String, nonce: String) async throws -> Bool {
        try await sql.raw(
            """
            SELECT 1 AS found FROM health_nonces
            WHERE walker_id = \(bind: walkerId) AND nonce = \(bind: nonce) AND used_at IS NOT NULL
            """
        ).first() != nil
    }

    /// Registers a key the walker's device just attested. False when the walker already has a key with this
    /// id: a key is attested once, and a second registration would reset its counter and reopen old
    /// assertions to replay.
    package func registerAppAttestKey(_ key: AppAttestKeyRecord, now: Date) async throws -> Bool {
        let at = now.millisecondsSince1970
        let row = try await sql.raw(
            """
            INSERT INTO app_attest_keys (walker_id, key_id, public_key, app_id, environment, sign_count, receipt,
                authority, created_at, updated_at)
            VALUES (\(bind: key.walkerId), \(bind: key.keyId), \(bind: key.publicKey), \(bind: key.appId),
                \(bind: key.environment), \(bind: key.signCount), \(bind: key.receipt),
                \(bind: key.development ? "development" : "apple"), \(bind: at), \(bind: at))
            ON CONFLICT (walker_id, key_id) DO NOTHING
            RETURNING key_id
            """
        ).first()
        return row != nil
    }

    /// The walker's key `keyId`, or (without one) their most recently registered keys, at most `limit`.
    package func appAttestKeys(walkerId: String, keyId: String?, limit: Int = 10) async throws
        -> [AppAttestKeyRecord]
    {
        let filter: SQLText = keyId.map { "AND key_id = \(bind: $0)" } ?? ""
        let rows = try await sql.raw(
            """
            SELECT key_id, public_key, app_id, environment, sign_count, receipt, authority FROM app_attest_keys
            WHERE walker_id = \(bind: walkerId) \(filter)
            ORDER BY created_at DESC, key_id LIMIT \(bind: limit)
            """
        ).all()
        return try rows.map { row in
            AppAttestKeyRecord(
                walkerId: walkerId,
                keyId: try row.decode(column: "key_id", as: String.self),
                publicKey: try row.decode(column: "public_key", as: String.self),
                appId: try row.decode(column: "app_id", as: String.self),
                environment: try row.decode(column: "environment", as: String.self),
                signCount: try row.decode(column: "sign_count", as: Int.self),
                receipt: try row.decode(column: "receipt", as: String.self),
                development: try row.decode(column: "authority", as: String.self) == "development")
        }
    }

    /// Moves the key's counter up to `next` while the stored counter is still below it (SPEC: strictly greater than
    /// the stored one), checked under the row's lock when the update runs: the counter only rises, so an assertion
    /// that another request's newer one overtook, or a replay, never counts; a newer one still counts when an older
    /// one of the same device committed first.
    package func advanceAppAttestCounter(walkerId: String, keyId: String, to next: Int, now: Date) async throws -> Bool
    {
        let row = try await sql.raw(
            """
            UPDATE app_attest_keys SET sign_count = \(bind: next), updated_at = \(bind: now.millisecondsSince1970)
            WHERE walker_id = \(bind: walkerId) AND key_id = \(bind: keyId) AND sign_count < \(bind: next)
            RETURNING key_id
            """
        ).first()
        return row != nil
    }
}
