import Foundation
import NIOCore
import StepCore
import StepDatabase
import StepStore
import StepTestSupport
import Testing

@testable import StepAPI

/// `POST /health` uses its nonce in one transaction and writes in another, with the attestation checked between:
/// an erasure that commits in between must not be undone by the write.
@Suite("A health submission against the walker's erasure")
struct HealthEraseTests {
    static let day = LocalDate(iso: "2026-05-18")!

    @Test(
        "a walker erased after its nonce was used gets nothing written (no record, key or audit row), even once a later request made its row again; one still there does",
        arguments: TestDatabases.kinds)
    func writeAfterErasure(kind: DatabaseKind) async throws {
        let harness = try await TestHarness.make(kind: kind)
        let now = harness.clock.now
        let submission = try HealthSubmission.decode(
            Array(String(buffer: HealthBody(nonce: "n", token: "t").buffer).utf8))
        // Each walker got its nonce and used it (the request's first transaction).
        for walker in ["walker-gone", "walker-here"] {
            try await harness.store.transaction { tx in
                _ = try await tx.lockWalker(walker, now: now)
                _ = try await tx.issueHealthNonce(
                    walkerId: walker, nonce: "n", now: now, lifetimeSeconds: 300, maxLive: 5)
                #expect(try await tx.consumeHealthNonce(walkerId: walker, nonce: "n", now: now) == .consumed)
            }
        }
        _ = try await harness.store.eraseWalker("walker-gone", actor: .commandLine, at: now)
        let key = AppAttestKeyRecord(
            walkerId: "walker-gone", keyId: "a2V5", publicKey: "cHVibGlj", appId: "ABCDE12345.org.stepledger.ios",
            environment: "production", signCount: 0, receipt: "")
        for attestation in [HealthAttestation.playIntegrity, .registerKey(key)] {
            let written = try await harness.store.transaction { tx in
                try await HealthWriteController.write(
                    submission, attestation: attestation, walkerId: "walker-gone", date: Self.day, now: now,
                    requestId: "erased-1", tx: tx)
            }
            #expect(written == nil, "\(attestation)")
        }
        #expect(try await harness.count("walkers", walker: "walker-gone") == 0, "the write did not bring the id back")
        // A later request of the same token (a long poll, a read) makes the walker's row again before the write:
        // the write still belongs to the erased walker, and writes nothing.
        try await harness.store.transaction { tx in _ = try await tx.lockWalker("walker-gone", now: now) }
        for attestation in [HealthAttestation.playIntegrity, .registerKey(key)] {
            let written = try await harness.store.transaction { tx in
                try await HealthWriteController.write(
                    submission, attestation: attestation, walkerId: "walker-gone", date: Self.day, now: now,
                    requestId: "erased-2", tx: tx)
            }
            #expect(written == nil, "after the row was made again: \(attestation)")
        }
        #expect(try await harness.count("health_records") == 0)
        #expect(try await harness.count("app_attest_keys") == 0)
        #expect(try await harness.count("attestation_logs", walker: "walker-gone") == 0)

        let kept = try await harness.store.transaction { tx in
            try await HealthWriteController.write(
                submission, attestation: .playIntegrity, walkerId: "walker-here", date: Self.day, now: now,
                requestId: "here-1", tx: tx)
        }
        guard case .success(let record)? = kept else { throw HealthEraseTestError.notWritten }
        #expect(record.walkerId == "walker-here" && record.date == Self.day)
        #expect(try await harness.count("health_records", walker: "walker-here") == 1)
        #expect(try await harness.count("attestation_logs", walker: "walker-here") == 1)
    }
}

enum HealthEraseTestError: Error {
    case notWritten
}
