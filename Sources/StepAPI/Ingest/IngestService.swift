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
    init(_ write: IngestWrite) {
        self.init(
            status: .ok, body: write.responseBody, verdict: write.attestationLog.verdict,
            reasons: write.attestationLog.reasons.compactMap(ReasonCode.init(rawValue:)))
    }

    /// The outcome of a refused ingest (422, or 403 for a source off the whitelist).
    init(_ rejection: IngestRejection) {
        self.init(
            status: HTTPResponse.Status(code: rejection.status), body: rejection.body, verdict: .rejected,
            reasons: rejection.attestationLog.reasons.compactMap(ReasonCode.init(rawValue:)))
    }
}

/// The ingest's rules after authentication, decoding and admission: for one request, a planner that the store's
/// admitted unit of work (`Store.ingest`) asks for the checks' refusal and for the writes, under the walker's
/// lock. The day itself is decided by `DayDecision`; this renders the answers the store keeps for replays and
/// queues the day's reconcile job.
struct IngestService: Sendable {
    struct Settings: Sendable {
        var mode: ServiceMode
        var limits: IngestLimits
        var defaultRegionId: String
        var reconcileDelaySeconds: Double
        /// Attempts a reconcile job gets before it is parked as dead.
        var reconcileMaxAttempts: Int = 10
        var repeatedRejections = RepeatedRejections()
    }

    let settings: Settings
    let whitelist: @Sendable () -> Set<String>

    func planner(for request: IngestRequest, now: Date, requestId: String) -> Planner {
        Planner(settings: settings, whitelist: whitelist(), request: request, now: now, requestId: requestId)
    }

    /// One request's checks and writes.
    struct Planner: IngestPlanner {
        let settings: Settings
        let whitelist: Set<String>
        let request: IngestRequest
        /// The clock's time, in the planner `planner(for:)` gives; the arrival, in the one `plan(walker:)` makes.
        let now: Date
        let requestId: String

        /// The checks run once per walker read; a refusal when a hard check fails, else the writes with the
        /// quarantine reasons that apply. Judged, recorded and answered at the ingest's arrival: the clock's time to
        /// the stored millisecond, and at least a millisecond after the walker's last recorded submission. Read under
        /// the walker's lock (or a cached copy the write checks), so a walker's submissions arrive in the order they
        /// were written whatever the clocks of the instances that took them: reconciliation orders a day's
        /// submissions by arrival, and a rising count taken by an instance whose clock is behind the last one's
        /// would read as one that went backwards. Reconciliation judges each submission at its stored arrival, and
        /// so does the ingest.
        func plan(walker: WalkerRecord) -> IngestPlan {
            Planner(
                settings: settings, whitelist: whitelist, request: request,
                now: IngestController.arrival(after: walker.lastSubmissionAt, clock: now), requestId: requestId
            ).planArrived(walker: walker)
        }

        private func planArrived(walker: WalkerRecord) -> IngestPlan {
            // The admission read the suspension with the walker's row: checking it costs no round trip.
            guard walker.suspendedAt == nil else { return .reject(suspended(walker: walker)) }
            let reasons = self.reasons(walker: walker)
            // A hard reason refuses the bucket (422, or 403 for a whitelist miss); every reason that applies, the
            // quarantine ones included, is reported with it (SPEC: all that apply are reported together).
            guard reasons.allSatisfy(\.isQuarantine) else {
                return .reject(rejection(walker: walker, reasons: reasons))
            }
            return .write { day in plan(walker: walker, state: day, quarantine: reasons) }
        }

        private func rejection(walker: WalkerRecord, reasons: [ReasonCode]) -> IngestRejection {
            // A 403 depends on configuration that may change, so it is not stored for replay.
            let whitelistMiss = reasons.contains(.sourceNotWhitelisted)
            let error: IngestAPIError =
                whitelistMiss
                ? .sourceNotWhitelisted(sourceBundleId: request.bucket.sourceBundleId)
                : .rejected(reasons: reasons, day: request.bucket.day)
            return IngestRejection(
                attestationLog: AttestationLogRecord(
                    walkerId: walker.walkerId, createdAt: now, route: IngestController.route, verdict: .rejected,
                    reasons: reasons.map(\.rawValue), tokenId: request.auditTokenId, requestId: requestId),
                idempotencyKey: request.storedKey, status: Int(error.status.code), body: error.bodyString,
                replayable: !whitelistMiss, reviewThreshold: settings.repeatedRejections)
        }

        /// A suspended walker's refusal: a REFUSED audit row and nothing else. The key is given back, so the same
        /// submission can be sent again once the walker is reinstated.
        private func suspended(walker: WalkerRecord) -> IngestRejection {
            let error = IngestAPIError.walkerSuspended
            return IngestRejection(
                attestationLog: AttestationLogRecord(
                    walkerId: walker.walkerId, createdAt: now, route: IngestController.route, verdict: .refused,
                    reasons: ["WALKER_SUSPENDED"], tokenId: request.auditTokenId, requestId: requestId),
                idempotencyKey: request.storedKey, status: Int(error.status.code), body: error.bodyString,
                replayable: false, reviewThreshold: settings.repeatedRejections)
        }

        /// Every check that applies to the request, given the walker's previous submission.
        private func reasons(walker: WalkerRecord) -> [ReasonCode] {
            let previous = walker.lastTimeZone.flatMap(TimeZoneCatalog.zone(named:)).flatMap { zone in
                walker.lastSubmissionAt.map { PreviousSubmission(timeZone: zone, receivedAt: $0) }
            }
            return IngestChecks(limits: settings.limits, mode: settings.mode).reasons(
                for: request.bucket, now: now, previous: previous, whitelist: whitelist)
        }

        /// Decides what an ingest that passed the hard checks writes, from the walker and the day as read, and
        /// renders its 200 body. `quarantine` holds the quarantine reasons that apply (the only reasons left).
        private func plan(walker: WalkerRecord, state: DayState, quarantine: [ReasonCode]) -> IngestWrite {
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
                    streakChange: streakChange, credit: credit,
                    // A final day's submission changes nothing, the walker's last zone included (it may be an old
                    // bucket resent from where the walker was then).
                    timeZone: log == nil ? nil : request.timeZoneIdentifier,
                    lifetimeStepsDelta: lifetimeDelta,
                    attestationLog: AttestationLogRecord(
                        walkerId: walkerId, createdAt: now, route: IngestController.route, verdict: verdict,
                        reasons: quarantine.map(\.rawValue), tokenId: request.auditTokenId, requestId: requestId),
                    idempotencyKey: request.storedKey, responseStatus: 200, responseBody: body, at: now)
                if let log {
                    if log.status == .quarantined { write.reviewReasons = quarantine.map(\.rawValue) }
                    if log.status == .pending {
                        // Reconciliation, no earlier than the delay; later ingests of the day coalesce into the job.
                        let job = ReconcileJob.newJob(
                            walkerId: walkerId, day: log.day,
                            runAt: now.addingTimeInterval(settings.reconcileDelaySeconds),
                            maxAttempts: settings.reconcileMaxAttempts)
                        write.followUps.append { JobQueue.enqueueStatement(job, now: now, when: $0) }
                        write.reconcileQueuedAt = state.pendingReconcileAt ?? job.runAt
                    }
                }
                return write
            }

            let decision: DayDecision
            switch DayDecision.ingest(
                existing: existing, walkerId: walkerId, day: bucket.day, timeZoneIdentifier: request.timeZoneIdentifier,
                count: bucket.count, streak: streak, quarantine: quarantine, mode: settings.mode,
                limits: settings.limits,
                at: now)
            {
            case .final(let existing):
                // Nothing changes: the answer announces the day as it stands, not the new count's Energy.
                let body = render(
                    log: existing, streak: streak.state(today: today), lifetimeSteps: walker.lifetimeSteps,
                    tierBeforeDay: streak.tierBeforeDay, reconcileAt: nil, quarantine: [],
                    provisionalSteps: existing.status == .rejected ? 0 : existing.reportedCount)
                return write(
                    log: nil, submission: nil, streakChange: nil, credit: 0, lifetimeDelta: 0, verdict: .unchanged,
                    body: body)
            case .open(let decided):
                decision = decided
            }
            let log = decision.log
            // The verdict the answer gives: a day that stays quarantined (for this submission's reasons or earlier
            // ones) is QUARANTINED, as its answer says; a rejected day records the submission and changes nothing.
            var verdict: AttestationVerdict = log.status == .quarantined ? .quarantined : .accepted
            if existing?.status == .rejected { verdict = .unchanged }

            let submission = StepSubmissionRecord(
                walkerId: walkerId, submissionId: StoreTransactionID.make(), bucket: bucket, receivedAt: now,
                appCheck: request.appCheckPresent)
            let streakAfter = decision.streakChange?.after ?? streak
            // The day's job runs when it was queued to: this ingest coalesces into a pending job and does not
            // move it (no debounce, so a walker who syncs every few seconds is still reconciled).
            // A job already due (the workers behind, or none running) runs no earlier than now: the answer never
            // announces a time that has passed.
            let reconcileAt = max(
                state.pendingReconcileAt ?? now.addingTimeInterval(settings.reconcileDelaySeconds), now)
            // A REJECTED day records the submission as evidence and never credits it: it announces no Energy.
            let body = render(
                log: log, streak: streakAfter.state(today: today),
                lifetimeSteps: walker.lifetimeSteps + decision.lifetimeStepsDelta, tierBeforeDay: streak.tierBeforeDay,
                reconcileAt: reconcileAt, quarantine: quarantine,
                provisionalSteps: log.status == .rejected ? 0 : bucket.count)
            return write(
                log: log, submission: submission, streakChange: decision.streakChange, credit: decision.credit,
                lifetimeDelta: decision.lifetimeStepsDelta, verdict: verdict, body: body)
        }

        /// The 200 body. `provisionalEnergy` is `provisionalSteps` at the day's multiplier: this submission's own
        /// count (seed 000: `floor(count × tierMult)`), or the day's count when the submission changes nothing (a
        /// final day), or none for a REJECTED day; `acceptedCount` is null unless the day is ACCEPTED; a PENDING day
        /// announces `reconcileAt` (its job's real time), and no other status announces one (seed 000's quarantine
        /// shape).
        private func render(
            log: StepLogRecord, streak: StreakState, lifetimeSteps: Int, tierBeforeDay: BonusTier, reconcileAt: Date?,
            quarantine: [ReasonCode], provisionalSteps: Int
        ) -> String {
            let reconciled = log.status == .accepted || log.status == .rejected
            let multiplier = log.multiplierPermille ?? tierBeforeDay.multiplierPermille
            var response = IngestResponse(
                provisional: !reconciled,
                stepLog: .init(
                    day: log.day.description, reportedCount: log.reportedCount,
                    acceptedCount: log.status == .accepted ? log.acceptedCount : nil,
                    reconciliationStatus: log.status.rawValue),
                provisionalEnergy: EnergyMath.energy(steps: provisionalSteps, multiplierPermille: multiplier),
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
            if log.status == .pending, let reconcileAt {
                // The job's time in whole seconds, rounded up (never truncated): an app that reads the day at the
                // announced time finds the job has run. The job itself keeps its exact time, so jobs fall due
                // evenly rather than in clumps on the second.
                response.reconcileEta = InstantParser.format(
                    Date(timeIntervalSince1970: reconcileAt.timeIntervalSince1970.rounded(.up)))
            }
            return response.jsonText
        }
    }
}
