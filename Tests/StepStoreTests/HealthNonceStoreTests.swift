import Foundation
import SQLKit
import StepDatabase
import StepTestSupport
import Testing

@testable import StepStore

/// A nonce's issue counts the walker's live nonces; the nonces it has used stay for a day past expiry, so the count
/// must not read them (migration 26).
@Suite("Health nonces in the store, on every engine")
struct HealthNonceStoreTests {
    static let t0 = Date(timeIntervalSince1970: 1_779_136_950)  // 2026-05-18T20:42:30Z

    @Test(
        "the live-nonce count reads the walker's unused nonces only, and the cap counts them alone",
        arguments: TestDatabases.kinds)
    func liveCount(kind: DatabaseKind) async throws {
        let test = try await TestDatabases.make(kind)
        let store = test.store
        // 300 nonces issued and used, then two live ones.
        try await store.transaction { tx in
            for index in 0..<300 {
                let nonce = "used-\(index)"
                let at = Self.t0.addingTimeInterval(Double(index))
                _ = try await tx.issueHealthNonce(
                    walkerId: "w", nonce: nonce, now: at, lifetimeSeconds: 300, maxLive: 5)
                #expect(try await tx.consumeHealthNonce(walkerId: "w", nonce: nonce, now: at) == .consumed)
            }
        }
        let now = Self.t0.addingTimeInterval(300)
        for index in 0..<2 {
            let issued = try await store.transaction {
                try await $0.issueHealthNonce(
                    walkerId: "w", nonce: "live-\(index)", now: now, lifetimeSeconds: 300, maxLive: 2)
            }
            #expect(issued == .issued(expiresAt: now.addingTimeInterval(300)))
        }
        let capped = try await store.transaction {
            try await $0.issueHealthNonce(walkerId: "w", nonce: "third", now: now, lifetimeSeconds: 300, maxLive: 2)
        }
        #expect(capped == .capped(retryAt: now.addingTimeInterval(300)))

        let statement = StoreTransaction.liveHealthNoncesStatement("w", at: now.millisecondsSince1970)
        let plan = try await QueryPlan.of(statement, in: store, avoiding: ["enable_seqscan"], generic: true)
        #expect(plan.contains("health_nonces_live"), "\(plan)")
        try await test.close()
    }
}
