import Foundation
import HTTPTypes
import StepCore
import StepJobs
import StepStore

/// How one ingest ended, for the response, the logs and the metrics.
struct IngestOutcome: Sendable {
    var status: HTTPResponse.Status
    var body: String
    var verdict: AttestationVerdict
    var reasons: [ReasonCode]
}

extension IngestOutcome {
    /// The outcome of an ingest that wrote `write` (200), with the quarantine reasons that applied.
    init(_ write: IngestWrite, reasons: [ReasonCode]) {
        self.init(
            status: .ok, body: write.responseBody, verdict: write.attestationLog.verdict, reasons: reasons)
    }
}

/// The ingest pipeline after authentication, decoding, rate limiting and the idempotency claim, in the same
/// transaction as the admission: it checks, writes the StepLog, credits the ledger and stores the response.
struct IngestService: Sendable {
    struct Settings: Sendable {
        var mode: ServiceMode
        var limits: IngestLimits
        var defaultRegionId: String
        var reconcileDelaySeconds: Double
        /// Attempts a reconcile job gets before it is parked as dead.
        var reconcileMaxAttempts: Int = 10
        var reviewRejectionThreshold: Int = 5
        var reviewWindowSeconds: Double = 86_400
    }

    let store: Store
    let settings: Settings
    let whitelist: @Sendable () -> Set<String>

    private var checks: IngestChecks { IngestChecks(limits: settings.limits, mode: settings.mode) }

    /// The ingest as statements of the caller's transaction, with the walker's row locked: by the same
    /// transaction's admission (`admitted`, SQLite), or here, with the day's state read in the same statement
    /// where the engine allows (PostgreSQL).
    func process(
        _ tx: StoreTransaction, walkerId: String, admitted: WalkerRecord?, request: IngestRequest, now: Date,
        requestId: String
    ) async throws -> IngestOutcome {
        let walker: WalkerRecord
        var dayState: DayState?
        if let admitted {
            walker = admitted
        } else {
            (walker, dayState) = try await tx.lockWalker(walkerId, day: request.bucket.day, now: now)
        }
        let reasons = self.reasons(for: request, walker: walker, now: now)
        let hardReasons = reasons.filter { !$0.isQuarantine }
        if !hardReasons.isEmpty {
            return try await reject(
                tx, walkerId: walkerId, request: request, reasons: hardReasons, now: now,
                requestId: requestId)
        }
        let state: DayState
        if let dayState {
            state = dayState
        } else {
            state = try await tx.dayState(walkerId: walkerId, day: request.bucket.day)
        }
        let write = plan(
            walker: walker, state: state, request: request, now: now, quarantine: reasons,
            requestId: requestId)
        guard try await tx.recordIngest(write) else {
            throw StoreError.corrupt("the walker's version changed while its row was locked")
        }
        return IngestOutcome(write, reasons: reasons)
    }

    /// PostgreSQL's common case, without a transaction: the admission read the walker and the day under one
    /// snapshot, and the writes apply only if the walker's `version` is still the one read. Nil when the
    /// caller must run `process` in a transaction instead: another ingest of the walker wrote in between, or
    /// the ingest is rejected (its writes depend on reads of their own).
    func processOptimistically(
        _ tx: StoreTransaction, walker: WalkerRecord, day: DayState, request: IngestRequest, now: Date,
        requestId: String
    ) async throws -> IngestOutcome? {
        let reasons = self.reasons(for: request, walker: walker, now: now)
        guard reasons.allSatisfy(\.isQuarantine) else { return nil }
        let write = plan(
            walker: walker, state: day, request: request, now: now, quarantine: reasons,
            requestId: requestId)
        guard try await tx.recordIngest(write) else { return nil }
        return IngestOutcome(write, reasons: reasons)
    }

    /// Every check that applies to the request, given the walker's previous submission.
    private func reasons(for request: IngestRequest, walker: WalkerRecord, now: Date) -> [ReasonCode] {
        let previous = walker.lastTimeZone.flatMap(TimeZoneCatalog.zone(named:)).flatMap { zone in
            walker.lastSubmissionAt.map { PreviousSubmission(timeZone: zone, receivedAt: $0) }
        }
        return checks.reasons(for: request.bucket, now: now, previous: previous, whitelist: whitelist())
    }

    /// A rejected ingest: the audit row, the review queue, and the stored 422 (a 403 is not stored).
    private func reject(
        _ tx: StoreTransaction, walkerId: String, request: IngestRequest, reasons: [ReasonCode], now: Date,
        requestId: String
    ) async throws -> IngestOutcome {
        let error: IngestAPIError =
            reasons.contains(.sourceNotWhitelisted)
            ? .sourceNotWhitelisted(sourceBundleId: request.bucket.sourceBundleId)
            : .rejected(reasons: reasons, day: request.bucket.day)
        try await tx.insertAttestationLog(
            AttestationLogRecord(
                walkerId: walkerId, createdAt: now, route: IngestController.route, verdict: .rejected,
                reasons: reasons.map(\.rawValue), tokenId: request.appCheckTokenId, requestId: requestId))
        try await flagForReviewIfRepeated(tx, walkerId: walkerId, now: now)
        // A 403 depends on configuration that may change, so it is not stored for replay.
        if case .sourceNotWhitelisted = error {
            try await tx.releaseIdempotencyKey(walkerId: walkerId, key: request.idempotencyKey)
        } else {
            try await tx.completeIdempotencyKey(
                walkerId: walkerId, key: request.idempotencyKey, status: Int(error.status.code),
                body: error.bodyString)
        }
        return IngestOutcome(status: error.status, body: error.bodyString, verdict: .rejected, reasons: reasons)
    }

    /// Decides what an ingest that passed the hard checks writes, from the walker and the day as read, and
    /// renders its 200 body. `quarantine` holds the quarantine reasons that apply (the only reasons left).
    private func plan(
        walker: WalkerRecord, state: DayState, request: IngestRequest, now: Date, quarantine: [ReasonCode],
        requestId: String
    ) -> IngestWrite {
        let bucket = request.bucket
        let walkerId = walker.walkerId
        let (existing, streak) = (state.log, state.streak)
        let today = LocalDate(instant: now, in: bucket.timeZone)
        func write(
            log: StepLogRecord?, submission: StepSubmissionRecord?, streakChange: StreakRunChange?, credit: Int,
            lifetimeDelta: Int, verdict: AttestationVerdict, body: String
        ) -> IngestWrite {
            var write = IngestWrite(
                walkerId: walkerId, walkerVersion: walker.version, stepLog: log, submission: submission,
                streakChange: streakChange, credit: credit, timeZone: request.timeZoneIdentifier,
                lifetimeStepsDelta: lifetimeDelta,
                attestationLog: AttestationLogRecord(
                    walkerId: walkerId, createdAt: now, route: IngestController.route, verdict: verdict,
                    reasons: quarantine.map(\.rawValue), tokenId: request.appCheckTokenId, requestId: requestId),
                idempotencyKey: request.idempotencyKey, responseStatus: 200, responseBody: body, at: now)
            if let log {
                if log.status == .quarantined { write.reviewReasons = quarantine.map(\.rawValue) }
                if log.status == .pending {
                    // Reconciliation, no earlier than the delay; later ingests of the day coalesce into the job.
                    let job = ReconcileJob.newJob(
                        walkerId: walkerId, day: log.day, runAt: now.addingTimeInterval(settings.reconcileDelaySeconds),
                        maxAttempts: settings.reconcileMaxAttempts)
                    write.followUps.append { JobQueue.enqueueStatement(job, now: now, when: $0) }
                }
            }
            return write
        }

        let decision: DayDecision
        switch DayDecision.ingest(
            existing: existing, walkerId: walkerId, day: bucket.day, timeZoneIdentifier: request.timeZoneIdentifier,
            count: bucket.count, streak: streak, quarantine: quarantine, mode: settings.mode, limits: settings.limits,
            at: now)
        {
        case .final(let existing):
            let body = render(
                log: existing, provisionalEnergy: existing.energyCredited,
                streak: streak.state(today: today), lifetimeSteps: walker.lifetimeSteps, now: now, quarantine: [])
            return write(
                log: nil, submission: nil, streakChange: nil, credit: 0, lifetimeDelta: 0, verdict: .unchanged,
                body: body)
        case .open(let decided):
            decision = decided
        }
        let log = decision.log
        var verdict: AttestationVerdict = quarantine.isEmpty ? .accepted : .quarantined
        if existing?.status == .rejected { verdict = .unchanged }

        let submission = StepSubmissionRecord(
            walkerId: walkerId, submissionId: StoreTransactionID.make(), day: bucket.day,
            source: bucket.source.rawValue, sourceBundleId: bucket.sourceBundleId, count: bucket.count,
            spanStart: bucket.spanStart, spanEnd: bucket.spanEnd, receivedAt: now)
        let streakAfter = decision.streakChange?.after ?? streak
        let body = render(
            log: log, provisionalEnergy: log.provisionalEnergy, streak: streakAfter.state(today: today),
            lifetimeSteps: walker.lifetimeSteps + decision.lifetimeStepsDelta, now: now, quarantine: quarantine)
        return write(
            log: log, submission: submission, streakChange: decision.streakChange, credit: decision.credit,
            lifetimeDelta: decision.lifetimeStepsDelta, verdict: verdict, body: body)
    }

    private func render(
        log: StepLogRecord, provisionalEnergy: Int, streak: StreakState, lifetimeSteps: Int, now: Date,
        quarantine: [ReasonCode]
    ) -> String {
        let reconciled = log.status == .accepted || log.status == .rejected
        var response = IngestResponse(
            provisional: !reconciled,
            stepLog: .init(
                day: log.day.description, reportedCount: log.reportedCount, acceptedCount: log.acceptedCount,
                reconciliationStatus: log.status.rawValue, showsAcceptedCount: log.status != .quarantined),
            provisionalEnergy: provisionalEnergy,
            energyCredited: reconciled ? log.energyCredited : nil,
            streakState: .init(streak),
            walker: .init(totalLifetimeSteps: lifetimeSteps, currentRegionId: settings.defaultRegionId))
        // Seed 000's quarantine shape whenever the day is under review; its reasons are this submission's own
        // (none when the day was quarantined earlier and this submission passed every check).
        if log.status == .quarantined {
            response.warning = .init(
                code: "STEP_QUARANTINED",
                message: "We're checking this step bucket. It may take up to 24h to confirm.",
                reasons: quarantine.map(\.rawValue))
        }
        if !reconciled {
            response.reconcileEta = InstantParser.format(now.addingTimeInterval(settings.reconcileDelaySeconds))
        }
        return response.jsonText
    }

    /// The 5th anti-cheat rejection inside the window opens one review entry per episode.
    private func flagForReviewIfRepeated(_ tx: StoreTransaction, walkerId: String, now: Date) async throws {
        // A resolved entry ended its episode: only rejections after the decision count toward the next one.
        var since = now.addingTimeInterval(-settings.reviewWindowSeconds)
        if let resolved = try await tx.lastResolvedReview(walkerId: walkerId, kind: .repeatedRejections) {
            since = max(since, resolved.addingTimeInterval(0.001))
        }
        let rejections = try await tx.countAntiCheatRejections(
            walkerId: walkerId, route: IngestController.route, since: since)
        guard rejections >= settings.reviewRejectionThreshold else { return }
        guard try await !tx.hasOpenReview(walkerId: walkerId, kind: .repeatedRejections) else { return }
        try await tx.openReview(
            walkerId: walkerId, kind: .repeatedRejections, subject: "\(rejections) rejections in 24h", at: now)
    }
}
