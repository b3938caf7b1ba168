import Foundation
import StepAttestation
import Synchronization
import Testing

/// The shared shape of every verifier: errors generic over a family's codes, policies returning one verdict type,
/// and the two ways a verifier runs its policies.
@Suite("Attestation errors and policies")
struct AttestationVocabularyTests {
    enum Code: AttestationErrorCode, CaseIterable {
        case firstRule
        case secondRule

        var reason: String {
            switch self {
            case .firstRule: "the first rule failed"
            case .secondRule: "the second rule failed"
            }
        }
    }

    struct Evidence: AttestationEvidence {
        typealias FailureCode = Code
        var value: Int
    }

    /// Fails with `code` when the value is below `minimum`, and counts its runs.
    struct Minimum: AttestationPolicy {
        let minimum: Int
        let code: Code
        let runs: Runs

        func evaluate(_ evidence: Evidence) -> PolicyVerdict<Code> {
            runs.record(code)
            return evidence.value >= minimum ? .meetsPolicy : .failsToMeetPolicy(code, detail: "\(evidence.value)")
        }
    }

    final class Runs: Sendable {
        private let codes = Mutex<[Code]>([])

        func record(_ code: Code) { codes.withLock { $0.append(code) } }
        var all: [Code] { codes.withLock { $0 } }
    }

    @Test("Errors compare and hash by code only; the detail and token id are carried, not compared")
    func equalityByCode() {
        let bare = AttestationError(Code.firstRule)
        let detailed = bare.with(detail: "value 3").with(tokenID: "jti-1")
        #expect(bare == detailed)
        #expect(Set([bare, detailed]).count == 1)
        #expect(bare != AttestationError(Code.secondRule))
        #expect(detailed.code == .firstRule)
        #expect(detailed.detail == "value 3")
        #expect(detailed.tokenID == "jti-1")
        #expect(detailed.with(detail: "other").tokenID == "jti-1")
        #expect(bare.detail == nil && bare.tokenID == nil)
    }

    @Test("Description names the code and its reason, and the detail when there is one")
    func description() {
        #expect(AttestationError(Code.firstRule).description == "firstRule: the first rule failed")
        #expect(
            AttestationError(Code.secondRule, detail: "value 3").description
                == "secondRule: the second rule failed (value 3)")
        #expect(AttestationError(Code.firstRule).reason == "the first rule failed")
    }

    @Test("Reason codes are the case names in upper snake case unless a family maps them")
    func reasonCodes() {
        #expect(AttestationError(Code.secondRule).reasonCode == "SECOND_RULE")
        #expect(AppAttestError(.counterNotIncreasing).reasonCode == "COUNTER_NOT_INCREASING")
        #expect(PlayIntegrityError(.nonceMismatch).reasonCode == "NONCE_MISMATCH")
        #expect(AppCheckError(.stale).reasonCode == .stale)
    }

    @Test("firstFailure stops at the first failing policy")
    func firstFailure() {
        let runs = Runs()
        let policies: [any AttestationPolicy<Evidence>] = [
            Minimum(minimum: 0, code: .firstRule, runs: runs),
            Minimum(minimum: 5, code: .secondRule, runs: runs),
            Minimum(minimum: 9, code: .firstRule, runs: runs),
        ]
        let failure = policies.firstFailure(for: Evidence(value: 3))
        #expect(failure?.code == .secondRule)
        #expect(failure?.detail == "3")
        #expect(runs.all == [.firstRule, .secondRule])
        #expect(policies.firstFailure(for: Evidence(value: 9)) == nil)
    }

    @Test("firstFailureListingAll runs every policy and lists every failure in the first one's detail")
    func listingAll() throws {
        let runs = Runs()
        let policies: [any AttestationPolicy<Evidence>] = [
            Minimum(minimum: 0, code: .firstRule, runs: runs),
            Minimum(minimum: 5, code: .secondRule, runs: runs),
            Minimum(minimum: 9, code: .firstRule, runs: runs),
        ]
        let failure = try #require(policies.firstFailureListingAll(for: Evidence(value: 3)))
        #expect(failure.code == .secondRule)
        #expect(
            failure.detail == "secondRule: the second rule failed (3); firstRule: the first rule failed (3)")
        #expect(runs.all == [.firstRule, .secondRule, .firstRule])
        #expect(policies.firstFailureListingAll(for: Evidence(value: 9)) == nil)
    }

    @Test("A verdict built from a code carries that code and detail")
    func verdictFromCode() {
        let verdict = PolicyVerdict<Code>.failsToMeetPolicy(.firstRule, detail: "why")
        guard case .failsToMeetPolicy(let reason) = verdict else {
            Issue.record("expected a failure")
            return
        }
        #expect(reason.code == .firstRule && reason.detail == "why")
        #expect(PolicyVerdict<Code>.meetsPolicy != verdict)
    }
}
