import Foundation
import OpenAPIRuntime

/// One source bundle's fresh count of a day, read again for a re-read request.
public struct RereadReading: Sendable, Hashable, Codable {
    /// The operating system's source of the samples, e.g. `com.apple.health`; each bundle once per answer.
    public var sourceBundleId: String
    /// The bundle's total for the day as read now, 0…2 147 483 648; a bundle left out counts as 0.
    public var count: Int
    /// The start and the end of the samples behind `count` (the end not before the start).
    public var sampleStart: Date
    public var sampleEnd: Date

    public init(sourceBundleId: String, count: Int, sampleStart: Date, sampleEnd: Date) {
        self.sourceBundleId = sourceBundleId
        self.count = count
        self.sampleStart = sampleStart
        self.sampleEnd = sampleEnd
    }
}

/// How the server decided a day with the app's re-read.
public struct RereadOutcome: Sendable, Hashable {
    /// The request the answer was for.
    public var requestId: String
    /// The day as the answer left it: ``DayState/Status-swift.enum/accepted`` at the highest bundle count when the
    /// re-read was consistent, else ``DayState/Status-swift.enum/quarantined`` with the reasons, for a reviewer.
    /// ``DayState/Status-swift.enum/pending`` when the re-read was consistent but a newer count of the day reached
    /// the server after the request: the re-read's count is credited, and the day is reconciled again next.
    public var day: DayState
    /// Whether the re-read was consistent (the day credited at its count), whatever the day's status.
    public var isAccepted: Bool
}

extension StepLedgerClient {
    /// Answers a challenge re-read request (`POST /step/reread`): the server asked for a fresh read of a day whose
    /// counts went backwards or whose sources overlapped, through a ``WalkerEvent/Kind/rereadRequested(_:)``
    /// event or ``WalkerState/rereadRequests`` of ``walker()``. Read the day's samples again over the request's
    /// window (``WalkerState/RereadRequest/windowStart`` to ``WalkerState/RereadRequest/windowEnd``) and give one
    /// reading per source bundle; the answer decides the day at once and the client's ``dayStates()`` show it
    /// (not when the answer is an earlier try's, replayed under its key: read the day then).
    ///
    /// Every try (up to `attempts`) goes under one idempotency key with the same body: a try that met a 5xx, a 409
    /// `IDEMPOTENCY_IN_FLIGHT` or no network is sent again, and the server's stored answer comes back if an earlier
    /// try was taken. The key is minted here unless `idempotencyKey` gives one.
    ///
    /// - Parameters:
    ///   - sampleDigest: a digest of the samples read (1 to 255 characters); the server keeps it as evidence for
    ///     a reviewer and does not interpret it.
    /// - Throws: ``StepLedgerError/rereadRefused(code:)`` when the request cannot be answered (any more);
    ///   ``StepLedgerError/invalidRequest(_:)`` for readings the server would refuse (checked before sending) or a
    ///   400; ``StepLedgerError/walkerSuspended``; ``StepLedgerError/rereadUnanswered(idempotencyKey:lastError:)``
    ///   with the key to call again with when no try was answered; and the errors of a read.
    public func answerReread(
        _ request: WalkerState.RereadRequest, readings: [RereadReading], sampleDigest: String, attempts: Int = 3,
        idempotencyKey: String? = nil
    ) async throws -> RereadOutcome {
        try Self.check(readings: readings, sampleDigest: sampleDigest, idempotencyKey: idempotencyKey)
        let key = idempotencyKey ?? IdempotencyKey.mint(at: now(), using: &random)
        let body = Components.Schemas.RereadRequest(
            requestId: request.id, nonce: request.nonce, day: request.day.description,
            counts: readings.map {
                .init(
                    sourceBundleId: $0.sourceBundleId, count: $0.count,
                    sampleSpan: .init(startUtc: $0.sampleStart, endUtc: $0.sampleEnd))
            },
            sampleDigest: sampleDigest, idempotencyKey: key)
        let answered = try await underOneKey(
            key, attempts: attempts, unanswered: StepLedgerError.rereadUnanswered
        ) {
            try await postReread(body)
        }
        // A replayed answer (an earlier try's, learned with its key) may be days old: the day may have moved on
        // since, so it does not overwrite what the client shows; `days(from:to:)` reads the day as it is.
        if !answered.replayed {
            note(answered.outcome.day)
            try save()
        }
        return answered.outcome
    }

    private static func check(readings: [RereadReading], sampleDigest: String, idempotencyKey: String?) throws {
        guard (1...16).contains(readings.count) else {
            throw StepLedgerError.invalidRequest("readings must hold 1 to 16 source bundles")
        }
        guard Set(readings.map(\.sourceBundleId)).count == readings.count else {
            throw StepLedgerError.invalidRequest("each sourceBundleId may appear once")
        }
        for reading in readings {
            guard (1...255).contains(reading.sourceBundleId.unicodeScalars.count) else {
                throw StepLedgerError.invalidRequest("sourceBundleId must be 1 to 255 characters")
            }
            guard (0...2_147_483_648).contains(reading.count) else {
                throw StepLedgerError.invalidRequest("count must be 0 to 2147483648")
            }
            guard reading.sampleEnd >= reading.sampleStart else {
                throw StepLedgerError.invalidRequest("sampleEnd must not be before sampleStart")
            }
        }
        guard (1...255).contains(sampleDigest.unicodeScalars.count) else {
            throw StepLedgerError.invalidRequest("sampleDigest must be 1 to 255 characters")
        }
        if let idempotencyKey { try IdempotencyKey.check(idempotencyKey) }
    }

    /// An answer, and whether it is the stored answer of an earlier try replayed under the key.
    private struct Answered: Sendable {
        var outcome: RereadOutcome
        var replayed: Bool
    }

    private func postReread(_ body: Components.Schemas.RereadRequest) async throws -> Answered {
        // A refused App Check token is asked for again once, without touching the session (as a flush does).
        var appCheckAskedAgain = false
        return try await authorized {
            while true {
                let appCheck: String?
                switch await askAppCheckToken() {
                case .success(let token): appCheck = token
                case .failure(let error): return .failure(error)
                }
                let output = try await client.answerReread(
                    .init(headers: .init(xFirebaseAppCheck: appCheck), body: .json(body)))
                switch output {
                case .ok(let ok):
                    guard case .json(let answer) = ok.body, let outcome = RereadOutcome(answer) else {
                        return .failure(.unexpectedResponse(status: 200, code: nil))
                    }
                    return .value(Answered(outcome: outcome, replayed: ok.headers.idempotentReplayed == "true"))
                case .badRequest(let response):
                    guard case .json(let error) = response.body else { return .failure(.invalidRequest("")) }
                    return .failure(.invalidRequest(error.message))
                case .unauthorized(let response):
                    guard case .json(let error) = response.body else { return .unauthorized(reason: nil) }
                    let reason = error.details.string("reason")
                    guard reason?.hasPrefix("APP_CHECK_") == true else { return .unauthorized(reason: reason) }
                    guard !appCheckAskedAgain else { return .failure(.unauthorized(reason: reason)) }
                    appCheckAskedAgain = true
                case .forbidden:
                    return .failure(.walkerSuspended)
                case .notFound(let response):
                    // Only the route's own refusal: a 404 from elsewhere (an older instance mid-deploy) is not an
                    // answer about the key.
                    let code = (try? response.body.json)?.error
                    guard let code, code.hasPrefix("REREAD_") else {
                        return .failure(.unexpectedResponse(status: 404, code: code))
                    }
                    return .failure(.rereadRefused(code: code))
                case .conflict(let response):
                    let code = (try? response.body.json)?.error
                    guard let code, code.hasPrefix("REREAD_") else {
                        return .failure(.unexpectedResponse(status: 409, code: code ?? "IDEMPOTENCY_IN_FLIGHT"))
                    }
                    return .failure(.rereadRefused(code: code))
                case .unprocessableContent(let response):
                    let code = (try? response.body.json)?.error
                    if code == "IDEMPOTENCY_KEY_REUSED" { return .failure(.idempotencyKeyReused) }
                    guard let code, code.hasPrefix("REREAD_") else {
                        return .failure(.unexpectedResponse(status: 422, code: code))
                    }
                    return .failure(.rereadRefused(code: code))
                case .contentTooLarge: return .failure(.invalidRequest("the request is too large"))
                case .unsupportedMediaType: return .failure(.invalidRequest("unsupported media type"))
                case .tooManyRequests(let response): return .failure(Self.rateLimited(response.headers.retryAfter))
                case .serviceUnavailable(let response):
                    return .failure(.serverUnavailable(retryAfter: response.headers.retryAfter.map(TimeInterval.init)))
                case .internalServerError: return .failure(.unexpectedResponse(status: 500, code: nil))
                case .undocumented(let status, _): return .failure(.unexpectedResponse(status: status, code: nil))
                }
            }
        }
    }
}

extension RereadOutcome {
    init?(_ wire: Components.Schemas.RereadResponse) {
        guard let day = CalendarDay(wire.stepLog.day) else { return nil }
        let status: DayState.Status =
            switch wire.stepLog.reconciliationStatus {
            case .accepted: .accepted
            case .pending: .pending
            case .quarantined: .quarantined
            }
        self.init(
            requestId: wire.requestId,
            day: DayState(
                day: day, status: status, reportedCount: wire.stepLog.reportedCount,
                acceptedCount: wire.stepLog.acceptedCount, reasons: wire.reasons),
            isAccepted: wire.outcome == .accepted)
    }
}
