import Foundation
import HTTPTypes
import HummingbirdTesting
import SQLKit
import StepAPI
import StepCore
import StepDatabase
import StepLogging
import StepSettings
import StepStore
import StepTestSupport
import Testing

@testable import StepJobs

/// Production reconciliation end to end through the API, with the injected clock and the worker driven by
/// hand: the job seed 001 step [6] describes, on both engines.
@Suite("Reconciliation in production mode")
struct ReconcileTests {
    static let walker = "walker-jwt"

    static func days(_ client: some TestClientProtocol, token: String) async throws -> [JSONValue] {
        let response = try await client.read("/step/days?from=2026-05-11&to=2026-05-19", token: token)
        guard case .array(let days) = try response.json["days"] else { throw JSONShapeError() }
        return days
    }

    /// A reconcile job for the walker's 2026-05-18, due now, beside any already queued (no dedupe key): a job run
    /// again, or one an ingest enqueued while the day's first job was running.
    static func enqueueLeftOverJob(_ harness: TestHarness) async throws {
        _ = try await harness.store.transaction { tx in
            try await JobQueue.enqueue(
                NewJob(
                    kind: "reconcile-steps", walkerId: walker, payload: #"{"day":"2026-05-18"}"#, dedupeKey: nil,
                    runAt: harness.clock.now, maxAttempts: 3),
                in: tx, now: harness.clock.now)
        }
    }

    static func reviews(_ harness: TestHarness) async throws -> [ReviewEntry] {
        try await harness.store.transaction { try await $0.reviews(walkerId: walker) }
    }

    @Test(
        "a PENDING day is ACCEPTED once the delay has passed, and credited once even when the job runs again",
        arguments: TestDatabases.kinds)
    func pendingToAccepted(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        try await harness.run { client in
            let ingest = try await client.ingest(IngestBody(count: 8421), token: token)
            #expect(try ingest.json["stepLog"]?["reconciliationStatus"] == .string("PENDING"))
            let pending = try await harness.app.worker.queue.list(state: .pending)
            #expect(pending.count == 1)
            #expect(pending.first?.runAt == harness.clock.now.addingTimeInterval(60))
            #expect(pending.first?.dedupeKey == "reconcile:2026-05-18")

            #expect(try await harness.app.worker.drain() == 0, "not before reconcileEta")
            harness.clock.advance(seconds: 60)
            #expect(try await harness.app.worker.drain() == 1)
            // The job's decision is on the anti-cheat sink once it has committed, as a request's verdict is.
            let decisions = harness.antiCheat.lines.filter { $0.contains(#""msg":"job verdict""#) }
            #expect(decisions.count == 1)
            #expect(decisions.first?.contains(#""verdict":"ACCEPTED""#) == true)
            #expect(decisions.first?.contains(#""route":"job:reconcile-steps""#) == true)
            #expect(decisions.first?.contains(#""day":"2026-05-18""#) == true)
            #expect(decisions.first.map { !LoggedText.mentions(8421, in: $0) } == true, "no count on the line")

            let day = try await Self.days(client, token: token).first
            #expect(day?["reconciliationStatus"] == .string("ACCEPTED"))
            #expect(day?["acceptedCount"] == .int(8421))
            #expect(day?["energyCredited"] == .int(8421))
            let walker = try await client.read("/walker", token: token).json
            #expect(walker["totalLifetimeSteps"] == .int(8421))
            #expect(walker["energy"]?["confirmed"] == .int(8421))
            #expect(walker["energy"]?["pending"] == .int(0))
            #expect(walker["streakState"]?["lastAttestedDate"] == .string("2026-05-18"))

            // The same job again (a worker that died after committing, a duplicate enqueue): no second credit.
            try await Self.enqueueLeftOverJob(harness)
            #expect(try await harness.app.worker.drain() == 1)
            #expect(try await harness.count("energy_ledger") == 1)
            #expect(try await client.read("/walker", token: token).json["totalLifetimeSteps"] == .int(8421))

            // Operators see the queue and the verdicts on /metrics.
            _ = try await client.ingest(IngestBody(day: "2026-05-17", count: 3000), token: token)
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            #expect(
                metrics.contains(#"stepledger_jobs_outcomes_total{kind="reconcile-steps",outcome="completed"} 2\#n"#))
            #expect(metrics.contains(#"stepledger_reconcile_verdicts_total{verdict="accepted"} 1\#n"#))
            #expect(metrics.contains(#"stepledger_reconcile_verdicts_total{verdict="unchanged"} 1\#n"#))
            #expect(metrics.contains(#"stepledger_jobs_queue_depth_jobs{state="pending"} 1.0\#n"#))
            #expect(metrics.contains(#"stepledger_jobs_queue_depth_jobs{state="dead"} 0.0\#n"#))
        }
    }

    @Test(
        "a left-over job that finds its day already decided moves the walker's version, so an ingest planned from a read before it (which saw that job pending) is planned again and does not announce a job that has gone",
        arguments: TestDatabases.kinds)
    func leftOverJobMovesTheVersion(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        @Sendable func version() async throws -> Int {
            try #require(try await harness.store.transaction { try await $0.walker(Self.walker) }).version
        }
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(count: 6000), token: token)
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            // A job for the decided day is still queued (an ingest enqueued it while the first job was running).
            try await Self.enqueueLeftOverJob(harness)
            let planned = try await version()
            #expect(try await harness.app.worker.drain() == 1)
            #expect(try await version() > planned, "the job found the day ACCEPTED and left")
            // The next ingest of the day is answered with the job it really queued.
            let answer = try await client.ingest(IngestBody(count: 6500), token: token)
            let eta = harness.clock.now.addingTimeInterval(60)
            #expect(
                try answer.json["reconcileEta"]
                    == .string(
                        InstantParser.format(Date(timeIntervalSince1970: eta.timeIntervalSince1970.rounded(.up)))))
        }
    }

    @Test(
        "a burst of ingests for one day makes one job, which accepts the day's highest count",
        arguments: TestDatabases.kinds)
    func burstCoalesces(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        try await harness.run { client in
            for count in [3000, 5000, 7000, 9000] {
                let response = try await client.ingest(IngestBody(count: count), token: token)
                #expect(response.status == .ok)
                harness.clock.advance(seconds: 5)
            }
            #expect(try await harness.count("jobs") == 1)
            harness.clock.advance(seconds: 60)
            #expect(try await harness.app.worker.drain() == 1)
            let day = try await Self.days(client, token: token).first
            #expect(day?["acceptedCount"] == .int(9000))
            #expect(try await harness.store.transaction { try await $0.energyBalance(walkerId: Self.walker) } == 9000)

            // A later, higher count reopens the day: one more job, crediting only the difference.
            _ = try await client.ingest(IngestBody(count: 9500), token: token)
            #expect(try await Self.days(client, token: token).first?["reconciliationStatus"] == .string("PENDING"))
            harness.clock.advance(seconds: 61)
            #expect(try await harness.app.worker.drain() == 1)
            #expect(try await harness.store.transaction { try await $0.energyBalance(walkerId: Self.walker) } == 9500)
            #expect(try await harness.count("energy_ledger") == 2)
        }
    }

    @Test(
        "with reread.enabled = false a count that goes backwards in one bundle is QUARANTINED and put on the review queue",
        arguments: TestDatabases.kinds)
    func backwardsQuarantines(kind: DatabaseKind) async throws {
        // With the re-read handshake off (`reread.enabled = false`), the day is quarantined at once.
        let (harness, token) = try await ProductionModeTests.setUp(kind) { $0.reread.enabled = false }
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(count: 6000), token: token)
            harness.clock.advance(seconds: 10)
            _ = try await client.ingest(IngestBody(count: 5000), token: token)
            harness.clock.advance(seconds: 60)
            #expect(try await harness.app.worker.drain() == 1)
            let day = try await Self.days(client, token: token).first
            #expect(day?["reconciliationStatus"] == .string("QUARANTINED"))
            #expect(day?["energyCredited"] == .int(0))
            #expect(try await harness.count("energy_ledger") == 0)
            let reviews = try await Self.reviews(harness)
            #expect(reviews.map(\.kind) == [.quarantinedDay])
            #expect(reviews.first?.reasons == ["COUNT_WENT_BACKWARDS"])
            #expect(reviews.first?.day == LocalDate(iso: "2026-05-18"))
            let audit = try await harness.store.transaction { try await $0.attestationLogs(walkerId: Self.walker) }
            #expect(audit.last?.route == "job:reconcile-steps")
            #expect(audit.last?.verdict == .quarantined)
            let walker = try await client.read("/walker", token: token).json
            #expect(walker["energy"]?["pending"] == .int(6000), "a quarantined day's Energy stays pending")
            #expect(try await harness.count("step_rereads") == 0, "no re-read request while the handshake is off")
        }
    }

    @Test(
        "with reread.enabled = false overlapping spans from two source bundles are QUARANTINED as double counting",
        arguments: TestDatabases.kinds)
    func crossSourceQuarantines(kind: DatabaseKind) async throws {
        // With the re-read handshake off (`reread.enabled = false`), the day is quarantined at once.
        let (harness, token) = try await ProductionModeTests.setUp(kind) { $0.reread.enabled = false }
        try await harness.run { client in
            _ = try await client.ingest(IngestBody(count: 6000), token: token)
            var watch = IngestBody(count: 6500)
            watch["sourceBundleId"] = .string("com.apple.watch")
            watch["source"] = .string("WatchNative")
            _ = try await client.ingest(watch, token: token)
            harness.clock.advance(seconds: 60)
            #expect(try await harness.app.worker.drain() == 1)
            #expect(try await Self.days(client, token: token).first?["reconciliationStatus"] == .string("QUARANTINED"))
            #expect(try await Self.reviews(harness).first?.reasons == ["CROSS_SOURCE_OVERLAP"])
        }
    }

    @Test(
        "a quarantined day stays quarantined on resubmission, with one open review entry collecting its reasons",
        arguments: TestDatabases.kinds)
    func quarantineSticks(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        try await harness.run { client in
            var gyroless = IngestBody(count: 6000)
            gyroless["gyroSamplesObserved"] = .bool(false)
            _ = try await client.ingest(gyroless, token: token)
            #expect(try await harness.count("jobs") == 0, "a quarantined day waits for review, not for a job")
            #expect(try await Self.reviews(harness).map(\.reasons) == [["GYRO_ABSENT"]])

            // The cheater resends with the flag set: the day stays QUARANTINED, seed 000's warning included.
            let resent = try await client.ingest(IngestBody(count: 7000), token: token)
            #expect(resent.status == .ok)
            #expect(try resent.json["stepLog"]?["reconciliationStatus"] == .string("QUARANTINED"))
            #expect(try resent.json["warning"]?["code"] == .string("STEP_QUARANTINED"))
            #expect(try resent.json["warning"]?["reasons"] == .array([]))
            #expect(try await harness.count("jobs") == 0)
            gyroless["idempotencyKey"] = .string("gyroless-again")
            _ = try await client.ingest(gyroless, token: token)
            harness.clock.advance(seconds: 3600)
            #expect(try await harness.app.worker.drain() == 0)
            let reviews = try await Self.reviews(harness)
            #expect(reviews.count == 1)
            #expect(reviews.first?.reasons == ["GYRO_ABSENT"])
            #expect(try await Self.days(client, token: token).first?["reportedCount"] == .int(7000))
            #expect(try await harness.count("step_submissions") == 3, "every resubmission is kept as evidence")
        }
    }

    @Test(
        "the burst guard counts only the part of sampleSpan inside the day and not after now, at ingest",
        arguments: TestDatabases.kinds)
    func burstSpanAtIngest(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        try await harness.run { client in
            // The clock is 2026-05-18T20:42:30Z (22:42 in Warsaw).
            for (start, end) in [
                ("2026-05-15T00:00:00Z", "2026-05-15T20:00:00Z"),  // three days before the day
                ("2026-05-18T21:00:00Z", "2026-05-19T09:00:00Z"),  // in the future
                ("2026-05-18T20:42:30Z", "2026-05-18T20:42:30Z"),  // zero length
            ] {
                let response = try await client.ingest(
                    IngestBody(count: 50_000, spanStart: start, spanEnd: end), token: token)
                #expect(response.status == .unprocessableContent, "\(start)…\(end)")
                #expect(try response.json["details"]?["reasons"] == .array([.string("BURST_RATE_EXCEEDED")]))
            }
            // Most of this span is in the future: the 8 min before now and the 5 min of allowance count.
            let future = try await client.ingest(
                IngestBody(count: 9 * 780 + 1, spanStart: "2026-05-18T20:34:30Z", spanEnd: "2026-05-19T06:00:00Z"),
                token: token)
            #expect(future.status == .unprocessableContent)
            let honest = try await client.ingest(
                IngestBody(count: 9 * 780, spanStart: "2026-05-18T20:34:30Z", spanEnd: "2026-05-19T06:00:00Z"),
                token: token)
            #expect(honest.status == .ok)
            #expect(try await harness.count("step_submissions") == 1)
        }
    }

    @Test(
        "reconciliation judges the whitelist as it stands when the job runs", arguments: TestDatabases.kinds)
    func whitelistAtReconcile(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        try await harness.run { client in
            var watch = IngestBody(count: 6000)
            watch["sourceBundleId"] = .string("com.apple.watch")
            watch["source"] = .string("WatchNative")
            let accepted = try await client.ingest(watch, token: token)
            #expect(accepted.status == .ok)
            // The operator takes the watch app off the whitelist before the job runs.
            harness.app.whitelist.replace(with: ["com.apple.health"])
            harness.clock.advance(seconds: 60)
            #expect(try await harness.app.worker.drain() == 1)
            #expect(try await Self.days(client, token: token).first?["reconciliationStatus"] == .string("QUARANTINED"))
            #expect(try await Self.reviews(harness).first?.reasons == ["SOURCE_NOT_WHITELISTED"])
        }
    }

    @Test(
        "reconciliation checks each submission's zone against every submission of the 24 h before it",
        arguments: TestDatabases.kinds)
    func zoneJumpAtReconcile(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        try await harness.run { client in
            // Each step is at most 12 h from the last one, so every ingest passes; Kiritimati (+14) and New York
            // (−4) are 18 h apart, within 24 h.
            let kiritimati = IngestBody(
                day: "2026-05-19", count: 3000, tz: "Pacific/Kiritimati", spanStart: "2026-05-18T10:00:00Z",
                spanEnd: "2026-05-18T20:00:00Z")
            #expect(try await client.ingest(kiritimati, token: token).status == .ok)
            harness.clock.advance(seconds: 60)
            #expect(try await client.ingest(IngestBody(count: 4000, tz: "Europe/Warsaw"), token: token).status == .ok)
            harness.clock.advance(seconds: 5)
            #expect(
                try await client.ingest(IngestBody(count: 5000, tz: "America/New_York"), token: token).status == .ok)
            harness.clock.advance(seconds: 120)
            #expect(try await harness.app.worker.drain() == 2)
            let days = try await Self.days(client, token: token)
            let status = { (day: String) in
                days.first { $0["day"] == .string(day) }?["reconciliationStatus"]
            }
            #expect(status("2026-05-18") == .string("QUARANTINED"))
            // The Kiritimati day itself had no earlier submission to jump from.
            #expect(status("2026-05-19") == .string("ACCEPTED"))
            #expect(try await Self.reviews(harness).first?.reasons == ["TZ_JUMP_DETECTED"])
        }
    }

    @Test(
        "the offline cap is measured from each submission's arrival, not from when the job runs",
        arguments: TestDatabases.kinds)
    func offlineCapFromArrival(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        try await harness.run { client in
            // Six days old when it arrives; the job only runs two days later (a worker outage).
            #expect(try await client.ingest(IngestBody(day: "2026-05-12", count: 4000), token: token).status == .ok)
            harness.clock.advance(seconds: 2 * 86_400)
            #expect(try await harness.app.worker.drain() == 1)
            let day = try await client.read("/step/days?from=2026-05-12&to=2026-05-12", token: token).json
            #expect(day["days"]?[0]?["reconciliationStatus"] == .string("ACCEPTED"))
        }
    }

    @Test(
        "an answer announces the time the day's job really runs, and provisionalEnergy is the submission's own",
        arguments: TestDatabases.kinds)
    func truthfulAnswers(kind: DatabaseKind) async throws {
        // With the re-read handshake off (`reread.enabled = false`), the day is quarantined at once.
        let (harness, token) = try await ProductionModeTests.setUp(kind) { $0.reread.enabled = false }
        try await harness.run { client in
            let started = harness.clock.now
            let first = try await client.ingest(IngestBody(count: 6000), token: token)
            let eta = InstantParser.format(started.addingTimeInterval(60))
            #expect(try first.json["reconcileEta"] == .string(eta))
            harness.clock.advance(seconds: 20)
            // A lower count later: it coalesces into the pending job, which keeps its time.
            let second = try await client.ingest(IngestBody(count: 5000), token: token)
            #expect(try second.json["reconcileEta"] == .string(eta), "the pending job's time, not now + delay")
            #expect(try second.json["provisionalEnergy"] == .int(5000), "this submission's count, not the day's")
            #expect(try second.json["stepLog"]?["reportedCount"] == .int(6000))
            #expect(
                try await harness.app.worker.queue.list(state: .pending).map(\.runAt) == [
                    started.addingTimeInterval(60)
                ])

            // Once the job has run, a new ingest queues a new job: its own time.
            harness.clock.advance(seconds: 40)
            #expect(try await harness.app.worker.drain() == 1)
            let day = try await Self.days(client, token: token).first
            #expect(day?["reconciliationStatus"] == .string("QUARANTINED"), "6000 then 5000 went backwards")
            // A quarantined day answers with no reconcileEta and a null acceptedCount.
            let third = try await client.ingest(IngestBody(count: 7000), token: token)
            #expect(try third.json["reconcileEta"] == nil)
            #expect(try third.json["stepLog"]?["acceptedCount"] == .null)
        }
    }

    @Test(
        "at an instant with milliseconds, reconcileEta is the job's time rounded up to the second: the job has run by then",
        arguments: TestDatabases.kinds)
    func etaInWholeSeconds(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        try await harness.run { client in
            harness.clock.advance(seconds: 0.7)
            let started = harness.clock.now
            let answer = try await client.ingest(IngestBody(count: 6000), token: token)
            let runAt = started.addingTimeInterval(60)
            let announced = Date(timeIntervalSince1970: runAt.timeIntervalSince1970.rounded(.up))
            #expect(announced > runAt && announced.timeIntervalSince(runAt) < 1)
            #expect(try answer.json["reconcileEta"] == .string(InstantParser.format(announced)))
            #expect(try await harness.app.worker.queue.list(state: .pending).map(\.runAt) == [runAt])
            // Just before its time the job waits; at it, it runs, before the announced second.
            harness.clock.advance(seconds: 59.9)
            #expect(try await harness.app.worker.drain() == 0)
            harness.clock.advance(seconds: runAt.timeIntervalSince(harness.clock.now))
            #expect(try await harness.app.worker.drain() == 1)
            #expect(harness.clock.now <= announced)
        }
    }

    @Test(
        "a PENDING answer for a day accepted before shows acceptedCount null and a new job's time",
        arguments: TestDatabases.kinds)
    func reopenedDay(kind: DatabaseKind) async throws {
        let (harness, token) = try await ProductionModeTests.setUp(kind)
        try await harness.run { client in
            let first = try await client.ingest(IngestBody(count: 6000), token: token)
            #expect(first.status == .ok)
            harness.clock.advance(seconds: 60)
            #expect(try await harness.app.worker.drain() == 1)
            harness.clock.advance(seconds: 30)
            let reopened = try await client.ingest(IngestBody(count: 9000), token: token)
            let json = try reopened.json
            #expect(json["stepLog"]?["reconciliationStatus"] == .string("PENDING"))
            #expect(json["stepLog"]?["acceptedCount"] == .null)
            #expect(json["reconcileEta"] == .string(InstantParser.format(harness.clock.now.addingTimeInterval(60))))
            // Its earlier acceptance still stands while the higher count waits: the day stays in the streak.
            #expect(json["streakState"]?["currentLengthDays"] == .int(1))
            #expect(json["streakState"]?["lastAttestedDate"] == .string("2026-05-18"))
        }
    }

    @Test(
        "a configured ingest.minDailyThreshold decides which days count for the streak, at the job's decision and at a test-phase ingest",
        arguments: TestDatabases.kinds)
    func configuredThreshold(kind: DatabaseKind) async throws {
        // 3 499 and 3 500 around a threshold of 3 500: only the second day is attested, so the run is one day long
        // (with the default 2 000 both would be, and the run two days).
        let (harness, token) = try await ProductionModeTests.setUp(kind) { $0.limits.minDailyThreshold = 3500 }
        try await harness.run { client in
            #expect(try await client.ingest(IngestBody(day: "2026-05-17", count: 3499), token: token).status == .ok)
            #expect(try await client.ingest(IngestBody(day: "2026-05-18", count: 3500), token: token).status == .ok)
            // The later day's job waits for the earlier one's, so it runs on the next turn.
            harness.clock.advance(seconds: 60)
            #expect(try await harness.app.worker.drain() == 1)
            harness.clock.advance(seconds: 60)
            #expect(try await harness.app.worker.drain() == 1)
            let days = try await Self.days(client, token: token)
            #expect(days.map { $0["reconciliationStatus"] } == [.string("ACCEPTED"), .string("ACCEPTED")])
            let streak = try await client.read("/walker", token: token).json["streakState"]
            #expect(streak?["currentLengthDays"] == .int(1))
            #expect(streak?["lastAttestedDate"] == .string("2026-05-18"))
        }
        let testPhase = try await TestHarness.make(kind: kind) { $0.limits.minDailyThreshold = 3500 }
        let walkerToken = try await testPhase.token(for: "walker-threshold")
        try await testPhase.run { client in
            let below = try await client.ingest(IngestBody(day: "2026-05-17", count: 3499), token: walkerToken)
            #expect(try below.json["streakState"]?["currentLengthDays"] == .int(0))
            let at = try await client.ingest(IngestBody(day: "2026-05-18", count: 3500), token: walkerToken)
            #expect(try at.json["streakState"]?["currentLengthDays"] == .int(1))
            #expect(try at.json["streakState"]?["lastAttestedDate"] == .string("2026-05-18"))
        }
    }

    @Test(
        "jobs.maxAttempts is the attempt budget of the jobs requests queue: an ingest's reconcile job, a decision's refund",
        arguments: TestDatabases.kinds)
    func configuredAttempts(kind: DatabaseKind) async throws {
        let (harness, token) = try await AdminTests.setUp(kind) { $0.jobs.maxAttempts = 4 }
        try await harness.run { client in
            // A rejected day that an allocation drew on: the decision queues the refund.
            _ = try await EventsTests.refund(harness, client, token: token, review: true)
            let refund = try await harness.app.worker.queue.list(state: .pending)
            #expect(refund.map(\.kind) == ["refund-allocation"])
            #expect(refund.map(\.maxAttempts) == [4])
            #expect(try await client.ingest(IngestBody(day: "2026-05-17", count: 3000), token: token).status == .ok)
            let reconcile = try await harness.app.worker.queue.list(state: .pending).filter {
                $0.kind == "reconcile-steps"
            }
            #expect(reconcile.count == 1)
            #expect(reconcile.map(\.maxAttempts) == [4])
        }
    }
}
