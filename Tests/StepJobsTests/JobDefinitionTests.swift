import Foundation
import StepCore
import Testing

@testable import StepJobs
@testable import StepStore

/// Typed payloads keep the texts already stored in databases, and what the jobs send keeps its bytes.
@Suite("Job definitions")
struct JobDefinitionTests {
    static let t0 = JobQueueTests.t0
    static let day = LocalDate(year: 2026, month: 5, day: 18)!

    static func claimed(_ job: NewJob) -> ClaimedJob {
        ClaimedJob(
            id: "j", walkerId: job.walkerId, kind: job.kind, payload: job.payload, dedupeKey: job.dedupeKey, attempt: 1,
            maxAttempts: job.maxAttempts)
    }

    static func claimed(kind: String, payload: String) -> ClaimedJob {
        ClaimedJob(id: "j", walkerId: "w", kind: kind, payload: payload, dedupeKey: nil, attempt: 1, maxAttempts: 3)
    }

    @Test("each kind's payload is stored as before the typed payloads, and what was stored decodes")
    func storedPayloads() throws {
        let reconcile = ReconcileJob.newJob(walkerId: "w", day: Self.day, runAt: Self.t0, maxAttempts: 10)
        #expect(reconcile.kind == "reconcile-steps")
        #expect(reconcile.payload == #"{"day":"2026-05-18"}"#)
        #expect(reconcile.dedupeKey == "reconcile:2026-05-18")
        #expect(try ReconcileJob.payload(of: Self.claimed(reconcile)).day == Self.day)

        let refund = RefundJob.newJob(
            RefundJob.Payload(allocationId: "a/1"), walkerId: "w", runAt: Self.t0, maxAttempts: 10)
        #expect(refund.kind == "refund-allocation")
        #expect(refund.payload == #"{"allocationId":"a/1"}"#)
        #expect(refund.dedupeKey == "refund:a/1")
        let storedRefund = Self.claimed(kind: RefundJob.kind, payload: #"{"allocationId":"0b5f-alloc"}"#)
        #expect(try RefundJob.payload(of: storedRefund).allocationId == "0b5f-alloc")

        let webhook = WebhookJob.newJob(WebhookJob.Payload(seq: 12), walkerId: "w", runAt: Self.t0, maxAttempts: 8)
        #expect(webhook.kind == "deliver-webhook")
        #expect(webhook.payload == #"{"seq":12}"#)
        #expect(webhook.dedupeKey == "webhook:12")
        #expect(try WebhookJob.payload(of: Self.claimed(webhook)).seq == 12)

        let prune = MaintenanceJob<AttestationLogPruning>.newJob(
            EmptyPayload(), walkerId: "", runAt: Self.t0, maxAttempts: 10)
        #expect(prune.kind == "prune-attestation-logs" && prune.payload == "{}" && prune.dedupeKey == prune.kind)
    }

    @Test(
        "a payload that does not decode fails its job naming what is wrong, never a value",
        arguments: [
            (#"{"day":"18/05/2026"}"#, "reconcile-steps payload does not decode: 'day' is not valid"),
            (#"{"dai":"2026-05-18"}"#, "reconcile-steps payload does not decode: 'day' is missing"),
            (#"{"day":20260518}"#, "reconcile-steps payload does not decode: 'day' is not of type String"),
            (#"{"day":null}"#, "reconcile-steps payload does not decode: 'day' is null"),
            ("day=2026-05-18", "reconcile-steps payload does not decode: the payload is not JSON"),
        ])
    func undecodablePayload(payload: String, message: String) throws {
        let job = Self.claimed(kind: ReconcileJob.kind, payload: payload)
        #expect(throws: JobError.failed(message)) { try ReconcileJob.payload(of: job) }
    }

    @Test("the maintenance jobs cover every pruned table, each under its own kind")
    func maintenanceTargets() {
        let targets = MaintenanceScheduler.targets
        #expect(Set(targets.map { $0.table }) == Set(PrunedTable.allCases))
        #expect(
            targets.map { $0.table.maintenanceJobKind } == [
                "prune-attestation-logs", "expire-idempotency-keys", "clean-rate-limits", "prune-health-nonces",
                "prune-walker-events", "prune-step-submissions",
            ])
    }

    @Test("the webhook body is the event's JSON with the walker last, byte for byte, escapes and all")
    func webhookBody() {
        let event = WalkerEvent(
            walkerId: "walker/1", seq: 12, type: "allocation-reverted",
            data: #"{"allocationId":"a","days":["2026-05-18"],"points":1000}"#,
            createdAt: Self.t0.addingTimeInterval(0.471))
        #expect(
            WebhookJob.body(event)
                == #"{"createdAt":"2026-05-18T20:42:30.471Z","data":{"allocationId":"a","days":["2026-05-18"],"#
                + #""points":1000},"id":"12","type":"allocation-reverted","walkerId":"walker/1"}"#)
        let odd = WalkerEvent(
            walkerId: "w\"\\", seq: 1, type: "t\u{1}\u{1F}\n\té", data: "{}", createdAt: Self.t0)
        #expect(
            WalkerEventJSON.text(odd, namingWalker: false)
                == #"{"createdAt":"2026-05-18T20:42:30.000Z","data":{},"id":"1","type":"t\u0001\u001f\n\té"}"#)
        #expect(WalkerEventJSON.text(odd, namingWalker: true).hasSuffix(#","walkerId":"w\"\\"}"#))
    }

    @Test("the webhook signature is t=<seconds>,v1=<hex HMAC-SHA256 of \"t.body\">")
    func webhookSignature() {
        // HMAC-SHA256("key", "1779136950.{}"), computed with openssl dgst -sha256 -hmac key.
        #expect(
            WebhookJob.signature(body: "{}", timestamp: 1_779_136_950, secret: Array("key".utf8))
                == "t=1779136950,v1=6bc68f37105973052edbd26c16e480c29943bbe0bd847fe9ebd43fe836e13da1")
    }

    @Test("an allocation-reverted event's data is {allocationId, days, points}, byte for byte")
    func allocationRevertedData() {
        let days = [Self.day.adding(days: -1), Self.day]
        #expect(
            EventAnnouncer.allocationRevertedData(allocationId: "alloc-1", days: days, points: 1200)
                == #"{"allocationId":"alloc-1","days":["2026-05-17","2026-05-18"],"points":1200}"#)
        #expect(
            EventAnnouncer.allocationRevertedData(allocationId: "alloc-1", days: [], points: 1200)
                == #"{"allocationId":"alloc-1","days":[],"points":1200}"#)
    }
}
