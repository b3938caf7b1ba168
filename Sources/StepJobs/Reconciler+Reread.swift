import Crypto
import Foundation
import StepAttestation
import StepCore
import StepStore

/// How the app's answer to a re-read request ended.
package enum RereadAnswerOutcome: Sendable, Hashable {
    /// No request with this id for this walker.
    case notFound
    /// The body names another day than the request's.
    case dayMismatch(expected: LocalDate)
    /// The nonce is not the request's.
    case nonceMismatch
    /// The request was answered already (the nonce is one-time).
    case alreadyAnswered
    /// The deadline passed, or the day was decided another way first.
    case expired
    /// The day was decided with the re-read: its log after the decision, and the verdict.
    case decided(StepLogRecord, ReconcileVerdict)
}

/// The challenge re-read handshake's writes (SPEC.md "Reconciliation"): asking, answering, and the deadline.
extension Reconciler {
    /// The walker event a re-read request is announced with.
    static let rereadRequested = "step-reread-requested"
    /// The route name of the audit rows a deadline writes.
    static let deadlineRoute = "job:" + RereadDeadlineJob.kind

    /// Records an open request for the day (the window is the day in its zone, a one-time nonce, the deadline),
    /// announces it to the app and queues the deadline job, in the caller's transaction under the walker's lock.
    func requestReread(_ tx: StoreTransaction, log: StepLogRecord, reasons: [String], now: Date) async throws {
        let zone = TimeZoneCatalog.zone(named: log.timeZone) ?? .gmt
        let window = DayReread.window(day: log.day, timeZone: zone)
        let request = RereadRequestRecord(
            id: StoreTransaction.newID(), walkerId: log.walkerId, day: log.day, timeZone: log.timeZone,
            windowStart: window.start, windowEnd: window.end, nonce: Self.makeNonce(),
            deadline: now.addingTimeInterval(reread.timeoutSeconds), reasons: reasons, createdAt: now)
        try await tx.insertReread(request)
        try await announcer.announce(
            tx, walkerId: log.walkerId, type: Self.rereadRequested, data: RereadJSON.eventData(request), now: now)
        _ = try await JobQueue.enqueue(
            RereadDeadlineJob.newJob(
                RereadDeadlineJob.Payload(requestId: request.id), walkerId: log.walkerId, runAt: request.deadline,
                maxAttempts: jobMaxAttempts),
            in: tx, now: now)
    }

    /// 32 random bytes from BoringSSL's generator, base64url without padding.
    static func makeNonce() -> String {
        let bytes = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }
        return Base64URL.encode(bytes)
    }

    /// The app's answer to request `id`: checked against the request (the walker's own, open, before its
    /// deadline, the same day, the nonce), then the day is decided with the re-read (`DayDecision.reread`) and
    /// the request closed with the answer kept as evidence; an inconsistent re-read opens the review entry with
    /// the re-read attached. Under the walker's lock, in the caller's transaction.
    func answer(
        _ tx: StoreTransaction, walkerId: String, id: String, nonce: String, day: LocalDate, answer: RereadAnswer,
        route: String, requestId: String, tokenId: String? = nil, now: Date
    ) async throws -> RereadAnswerOutcome {
        guard let unlocked = try await tx.reread(walkerId: walkerId, id: id) else { return .notFound }
        let state = try await tx.lockWalkerReadingDay(walkerId, day: unlocked.day, now: now).day
        guard let request = try await tx.reread(walkerId: walkerId, id: id) else { return .notFound }
        guard day == request.day else { return .dayMismatch(expected: request.day) }
        switch request.state {
        case .answered: return .alreadyAnswered
        case .expired: return .expired
        case .open: break
        }
        guard now < request.deadline else { return .expired }
        guard ConstantTime.equals(nonce.utf8, request.nonce.utf8) else { return .nonceMismatch }
        guard let log = state.log, log.status == .pending else {
            _ = try await tx.closeReread(walkerId: walkerId, id: id, state: .expired, at: now)
            return .expired
        }
        let evidence = try await evidence(tx, log: log).evidence
        guard
            let (verdict, decision) = DayDecision.reread(
                log, evidence: evidence, answer: answer, streak: state.streak, limits: limits,
                timeZone: TimeZoneCatalog.zone(named: request.timeZone),
                askedAt: request.judgedThrough ?? request.createdAt,
                at: now)
        else { return .expired }
        let outcome = verdict.attestationVerdict
        let answerJSON = RereadJSON.answer(answer)
        _ = try await tx.closeReread(
            walkerId: walkerId, id: id, state: .answered, answer: answerJSON, outcome: outcome.rawValue, at: now)
        var answered = request
        answered.state = .answered
        answered.answeredAt = now
        answered.answer = answerJSON
        let call = AuditedCall(tokenId: tokenId, status: 200)
        try await write(
            tx, decision, verdict: verdict, route: route, runId: requestId,
            reread: RereadJSON.reviewEvidence(answered, answer: answer), call: call, now: now)
        if case .accept = verdict {
            try await tx.insertAttestationLog(
                AttestationLogRecord(
                    walkerId: walkerId, createdAt: now, route: route, verdict: .accepted, reasons: [],
                    tokenId: tokenId, requestId: requestId, status: call.status))
            if decision.log.status == .pending {
                // Submissions newer than the request wait for their reconcile: the ones that arrived while the
                // request was open found it open and left the day to this answer.
                var job = ReconcileJob.newJob(walkerId: walkerId, day: log.day, runAt: now, maxAttempts: jobMaxAttempts)
                // A job of the day already waiting (a later ingest's, due after the reconcile delay) is brought
                // forward: it is the one that judges them.
                job.earlierRunAtWins = true
                _ = try await JobQueue.enqueue(job, in: tx, now: now)
            }
        }
        return .decided(decision.log, verdict)
    }

    /// At the deadline: a request still open expires, and its day, if still PENDING, is quarantined with the
    /// findings that asked for the re-read, those the day's evidence shows now (a submission since, or a source
    /// taken off the whitelist), and `REREAD_NOT_ANSWERED`. A request answered or closed before does nothing.
    /// Returns the day and the verdict when the day was quarantined.
    func expire(_ tx: StoreTransaction, walkerId: String, id: String, runId: String, now: Date) async throws
        -> (day: LocalDate, verdict: ReconcileVerdict)?
    {
        guard let unlocked = try await tx.reread(walkerId: walkerId, id: id), unlocked.state == .open else {
            return nil
        }
        let state = try await tx.lockWalkerReadingDay(walkerId, day: unlocked.day, now: now).day
        guard let request = try await tx.reread(walkerId: walkerId, id: id), request.state == .open else {
            return nil
        }
        guard let log = state.log, log.status == .pending else {
            _ = try await tx.closeReread(walkerId: walkerId, id: id, state: .expired, at: now)
            return nil
        }
        let found = DayReconciliation.verdict(try await evidence(tx, log: log).evidence, limits: limits).reasons
        return (
            log.day,
            try await expire(tx, request, log: log, streak: state.streak, found: found, runId: runId, now: now)
        )
    }

    /// Under the walker's lock, with the day PENDING: closes the open `request` as expired and quarantines the day
    /// with the findings that asked for the re-read, then those of `found` (what the day's evidence shows now) it
    /// did not name, then `REREAD_NOT_ANSWERED`. Returns the verdict written.
    func expire(
        _ tx: StoreTransaction, _ request: RereadRequestRecord, log: StepLogRecord, streak: StreakNeighbourhood,
        found: [String], runId: String, now: Date
    ) async throws -> ReconcileVerdict {
        _ = try await tx.closeReread(walkerId: log.walkerId, id: request.id, state: .expired, at: now)
        let reasons = request.reasons + found.filter { !request.reasons.contains($0) }
        let verdict = ReconcileVerdict.quarantine(reasons: reasons + [RereadFinding.notAnswered.rawValue])
        var expired = request
        expired.state = .expired
        try await write(
            tx, DayDecision.quarantine(log, streak: streak, at: now), verdict: verdict, route: Self.deadlineRoute,
            runId: runId, reread: RereadJSON.reviewEvidence(expired, answer: nil), now: now)
        return verdict
    }
}

/// The JSON texts of the handshake: the event's data, the answer kept as evidence, and what the review entry
/// shows an operator. Sorted keys, like every text the job system writes.
package enum RereadJSON {
    struct Window: Encodable {
        var startUtc: String
        var endUtc: String
    }

    struct Count: Encodable {
        struct Span: Encodable {
            var startUtc: String
            var endUtc: String
        }
        var sourceBundleId: String
        var count: Int
        var sampleSpan: Span
    }

    struct Answer: Encodable {
        var counts: [Count]
        var sampleDigest: String
    }

    static func window(_ request: RereadRequestRecord) -> Window {
        Window(startUtc: InstantParser.format(request.windowStart), endUtc: InstantParser.format(request.windowEnd))
    }

    /// `{"day", "deadline", "nonce", "requestId", "window": {"endUtc", "startUtc"}}`.
    package static func eventData(_ request: RereadRequestRecord) -> String {
        struct Event: Encodable {
            var requestId: String
            var day: String
            var window: Window
            var nonce: String
            var deadline: String
        }
        return JobJSON.encode(
            Event(
                requestId: request.id, day: request.day.description, window: window(request), nonce: request.nonce,
                deadline: InstantParser.format(request.deadline)))
    }

    static func answerValue(_ answer: RereadAnswer) -> Answer {
        Answer(
            counts: answer.counts.map {
                Count(
                    sourceBundleId: $0.sourceBundleId, count: $0.count,
                    sampleSpan: .init(
                        startUtc: InstantParser.format($0.spanStart, fractional: true),
                        endUtc: InstantParser.format($0.spanEnd, fractional: true)))
            }, sampleDigest: answer.sampleDigest)
    }

    /// `{"counts": [{"count", "sampleSpan", "sourceBundleId"}], "sampleDigest"}`.
    package static func answer(_ answer: RereadAnswer) -> String { JobJSON.encode(answerValue(answer)) }

    /// What the review entry keeps: the request (id, window, when asked, the deadline, its findings) and the
    /// answer, or null when none came.
    package static func reviewEvidence(_ request: RereadRequestRecord, answer: RereadAnswer?) -> String {
        struct Evidence: Encodable {
            var requestId: String
            var window: Window
            var requestedAt: String
            var deadline: String
            var reasons: [String]
            var state: String
            var answeredAt: String?
            var answer: Answer?

            enum CodingKeys: String, CodingKey {
                case requestId, window, requestedAt, deadline, reasons, state, answeredAt, answer
            }

            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(requestId, forKey: .requestId)
                try container.encode(window, forKey: .window)
                try container.encode(requestedAt, forKey: .requestedAt)
                try container.encode(deadline, forKey: .deadline)
                try container.encode(reasons, forKey: .reasons)
                try container.encode(state, forKey: .state)
                try container.encode(answeredAt, forKey: .answeredAt)
                try container.encode(answer, forKey: .answer)
            }
        }
        return JobJSON.encode(
            Evidence(
                requestId: request.id, window: window(request), requestedAt: InstantParser.format(request.createdAt),
                deadline: InstantParser.format(request.deadline), reasons: request.reasons,
                state: request.state.rawValue, answeredAt: request.answeredAt.map { InstantParser.format($0) },
                answer: answer.map(answerValue)))
    }

    /// Base64url without padding (RFC 4648 §5).
}

/// The answering side of the handshake for `POST /step/reread`: decides the day with the app's re-read the way
/// reconciliation decides it (the same checks, the same writes), in the route's transaction.
package struct RereadResolver: Sendable {
    let reconciler: Reconciler

    package init(
        limits: IngestLimits, whitelist: @escaping @Sendable () -> Set<String>, refundGraceSeconds: Double,
        jobMaxAttempts: Int
    ) {
        reconciler = Reconciler(
            limits: limits, whitelist: whitelist, refundGraceSeconds: refundGraceSeconds,
            jobMaxAttempts: jobMaxAttempts)
    }

    package func answer(
        _ tx: StoreTransaction, walkerId: String, id: String, nonce: String, day: LocalDate, answer: RereadAnswer,
        route: String, requestId: String, tokenId: String?, now: Date
    ) async throws -> RereadAnswerOutcome {
        try await reconciler.answer(
            tx, walkerId: walkerId, id: id, nonce: nonce, day: day, answer: answer, route: route,
            requestId: requestId, tokenId: tokenId, now: now)
    }
}
