import Foundation
import HTTPTypes
import OpenAPIRuntime

extension StepLedgerClient {
    /// Sends every queued bucket that is due through `POST /step/ingest:batch`, oldest day first, and returns
    /// what happened to each.
    ///
    /// Nothing is sent while a 429, a 503 or the walker's suspension pauses the queue, nor a bucket before its
    /// backoff has passed. A bucket the server answers for good leaves the queue (``FlushReport/delivered`` or
    /// ``FlushReport/refused``); one that meets a 5xx, a 409 `IDEMPOTENCY_IN_FLIGHT` or no network stays, to be
    /// retried later with the same key and bytes (unless a newer count of its day and source bundle was recorded
    /// meanwhile, which replaces it). A 403 `WALKER_SUSPENDED` keeps every bucket and pauses the queue for
    /// ``RetryPolicy/suspendedPause`` (an operator may reinstate the walker). Only one flush runs at a time: a
    /// second call waits for the first, then flushes again. Cancelling the calling task stops the flush once the
    /// request in flight returns (at once, when the transport gives up on cancellation): what was answered is kept,
    /// the rest stays queued under the same keys, not backed off, and the call throws `CancellationError`.
    ///
    /// - Throws: ``StepLedgerError/unauthorized(reason:)`` when the server refuses a freshly asked session token
    ///   too, or a freshly asked App Check token (its `reason` then starts with `APP_CHECK_`: the walker's session is
    ///   fine, the App Check provider must hand out tokens minted within five minutes);
    ///   ``StepLedgerError/storeUnavailable(_:)`` when the queue cannot be written;
    ///   ``StepLedgerError/storeBelongsToAnotherWalker`` when the session token is another walker's than the
    ///   folder's (nothing is sent).
    @discardableResult
    public func flush() async throws -> FlushReport {
        while let running = flushTask {
            _ = try? await running.value
            if flushTask == running { flushTask = nil }
        }
        let task = Task { try await self.runFlush() }
        flushTask = task
        defer { if flushTask == task { flushTask = nil } }
        // The caller's cancellation reaches the flush (an app's background time running out).
        return try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }

    /// How many days past the offline cap, by the device's clock, a bucket is dropped unsent when the server's clock
    /// cannot be read (so a queue that is never online does not fill up with days the server would refuse). Whenever
    /// the server answers, its clock alone decides: the device's may be days or months ahead (set by hand, or wrong
    /// after the battery ran out), and the queued days it would drop are real ones the server still takes.
    static let deviceClockGraceDays = 30

    /// The server's clock now: the `Date` of its answer to `GET /livez` (any answer carries one, a proxy's too; the
    /// device's clock when it has none); a transport failure when no answer came.
    func serverClock() async -> Result<Date, StepLedgerError> {
        let request = HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/livez")
        do {
            let (response, body) = try await transport.send(
                request, body: nil, baseURL: configuration.serverURL, operationID: "getLiveness")
            if let body { _ = try? await Data(collecting: body, upTo: 65_536) }
            // An answer without a date (a gateway that strips it) leaves the device's clock to judge, as no answer
            // at all would keep the queue from ever moving.
            return .success(response.headerFields[.date].flatMap(Self.httpDate) ?? now())
        } catch {
            return .failure(.transport("the server's clock could not be read: \(error)"))
        }
    }

    private enum BatchAnswer {
        case results([Components.Schemas.IngestBatchResponse.ResultsPayloadPayload])
        case unauthorized(reason: String?)
        case rateLimited(retryAfter: TimeInterval?)
        case unavailable(retryAfter: TimeInterval?)
        case refusedWhole(status: Int, message: String)
        case failed(StepLedgerError)
    }

    /// Throws `CancellationError` when the flush's caller has cancelled it, with what the flush changed saved first.
    private func stopIfCancelled() throws {
        guard Task.isCancelled else { return }
        try save()
        throw CancellationError()
    }

    /// How far the device's clock may step back (a network time correction) before a flush asks the server's clock.
    static let clockSetBackTolerance: TimeInterval = 300

    private func runFlush() async throws -> FlushReport {
        try await bindOwner()
        var report = FlushReport()
        var held = false
        if state.hasBucket(pastCapDays: max(0, configuration.offlineCapDays - 1), at: now())
            || state.recordedAfter(now().addingTimeInterval(Self.clockSetBackTolerance)),
            !state.due(at: now(), longestBackoff: configuration.retry.maximumDelay).isEmpty
        {
            // Within a day of the cap by the device's clock, or past it: the server's clock decides, as the device's
            // may be ahead (a day past the cap the server still takes) or behind (a day on the cap the server already
            // refuses). So too when a bucket was recorded after the device's now: the clock has been set back since,
            // by any number of days, so a day past the cap may look days short of it. A bucket past the cap by the
            // server's clock is dropped unsent (sent, it would be refused, and its rejection counted against the
            // walker); without the server's clock nothing is sent, and only a day past the cap even for a device
            // clock a month fast is dropped.
            let clock = await serverClock()
            try stopIfCancelled()
            switch clock {
            case .success(let serverNow):
                report.expired = state.dropExpired(
                    now: serverNow, capDays: configuration.offlineCapDays, droppedAt: now())
            case .failure(let error):
                report.expired = state.dropExpired(
                    now: now(), capDays: configuration.offlineCapDays + Self.deviceClockGraceDays, droppedAt: now())
                // As a request that met no network: the due buckets back off.
                backOff(state.due(at: now(), longestBackoff: configuration.retry.maximumDelay))
                report.interruption = error
                held = true
            }
        }
        var refreshed = false
        var appCheckAskedAgain = false
        var batchSize = configuration.batchSize
        flushing: while !held {
            try stopIfCancelled()
            let due = state.due(at: now(), longestBackoff: configuration.retry.maximumDelay)
            guard !due.isEmpty else { break }
            let batch = Array(due.prefix(batchSize))
            // The attempt is on disk before the request leaves (`attempts` says how often a bucket was sent). A newer
            // count of the slot recorded meanwhile supersedes a bucket in flight once its answer is in
            // (`dropSuperseded`). The same write keeps what the previous request's answers changed.
            for bucket in batch { state.update(key: bucket.idempotencyKey) { $0.attempts += 1 } }
            try save()
            report.requests += 1
            sending = Set(batch.map(\.idempotencyKey))
            let answer = await send(batch)
            sending = []
            defer { state.dropSuperseded() }
            if case .failed = answer {
                // Given up for the cancellation, not failed: the buckets go again, unpunished, at the next flush.
                try stopIfCancelled()
            }
            switch answer {
            case .results(let results):
                for (bucket, result) in zip(batch, results) {
                    apply(result, to: bucket, report: &report)
                }
                // A later 401 of this flush is news (a token that expired since): worth one more ask each.
                refreshed = false
                appCheckAskedAgain = false
                // A bucket the server could not store for want of its database (it then answers the rest of the
                // batch 503 at once) stops the flush and pauses the queue as a whole-request 503 does: the next
                // request would meet the same.
                if results.contains(where: { $0.status == 503 }) {
                    pause(for: nil)
                    report.interruption = .serverUnavailable(retryAfter: nil)
                    break flushing
                }
            case .unauthorized(let reason) where reason?.hasPrefix("APP_CHECK_") == true:
                // The App Check token, not the session: ask the provider again (its next token may be fresh), once.
                guard !appCheckAskedAgain else {
                    try save()
                    throw StepLedgerError.unauthorized(reason: reason)
                }
                appCheckAskedAgain = true
            case .unauthorized(let reason):
                guard !refreshed else {
                    try save()
                    throw StepLedgerError.unauthorized(reason: reason)
                }
                refreshed = true
                await tokens.requestRefresh()
            case .rateLimited(let retryAfter):
                pause(for: retryAfter)
                report.interruption = .rateLimited(retryAfter: retryAfter ?? configuration.retry.defaultPause)
                break flushing
            case .unavailable(let retryAfter):
                if let retryAfter { pause(for: retryAfter) } else { backOff(batch) }
                report.interruption = .serverUnavailable(retryAfter: retryAfter)
                break flushing
            case .refusedWhole(let status, let message):
                // The server refused the request as a whole. Alone, a bucket that is refused so is malformed for
                // good; in a batch, send the buckets one by one to find it.
                if batch.count > 1 {
                    batchSize = 1
                } else if status == 400 || status == 413 {
                    refuse(batch[0], .invalidRequest(message), report: &report)
                } else {
                    backOff(batch)
                    report.interruption = .unexpectedResponse(status: status, code: nil)
                    break flushing
                }
            case .failed(let error):
                if case .unauthorized = error {
                    try save()
                    throw error
                }
                if error == .storeBelongsToAnotherWalker {
                    // Nothing was sent: the buckets stay as they were, for their own walker's next flush.
                    for bucket in batch { state.update(key: bucket.idempotencyKey) { $0.attempts -= 1 } }
                    try save()
                    throw error
                }
                backOff(batch)
                report.interruption = error
                break flushing
            }
        }
        // Cancelled while the last request was answered (a 429, a 503, a refusal): what the answer changed is
        // kept, and the caller hears of the cancellation rather than a report.
        try stopIfCancelled()
        try save()
        let current = now()
        report.remaining = state.buckets.count
        report.nextAttemptAt = state.nextAttempt(after: current, longestBackoff: configuration.retry.maximumDelay)
        report.pausedUntil = state.pause(at: current)
        return report
    }

    private func send(_ batch: [QueuedBucket]) async -> BatchAnswer {
        let appCheck: String?
        switch await askAppCheckToken() {
        case .success(let token): appCheck = token
        case .failure(let error): return .failed(error)
        }
        let body = Components.Schemas.IngestBatchRequest(buckets: batch.map { .init(value1: $0.wireBody) })
        let output: Operations.IngestStepBatch.Output
        do {
            output = try await client.ingestStepBatch(
                .init(headers: .init(xFirebaseAppCheck: appCheck), body: .json(body)))
        } catch {
            // A refusal the generated client could not read (a proxy's page): what its status says.
            switch Self.undecodedRefusal(error, now: now()) {
            case (401, _)?: return .unauthorized(reason: nil)
            case (429, let retryAfter)?: return .rateLimited(retryAfter: retryAfter)
            case (503, let retryAfter)?: return .unavailable(retryAfter: retryAfter)
            default: return .failed(Self.failure(error))
            }
        }
        switch output {
        case .ok(let ok):
            guard case .json(let answer) = ok.body, answer.results.count == batch.count else {
                return .failed(.unexpectedResponse(status: 200, code: nil))
            }
            return .results(answer.results)
        case .unauthorized(let response):
            guard case .json(let error) = response.body else { return .unauthorized(reason: nil) }
            return .unauthorized(reason: error.details.string("reason"))
        case .tooManyRequests(let response):
            return .rateLimited(retryAfter: response.headers.retryAfter.map(TimeInterval.init))
        case .serviceUnavailable(let response):
            return .unavailable(retryAfter: response.headers.retryAfter.map(TimeInterval.init))
        case .badRequest(let response):
            guard case .json(let error) = response.body else { return .refusedWhole(status: 400, message: "") }
            return .refusedWhole(status: 400, message: error.message)
        case .contentTooLarge:
            return .refusedWhole(status: 413, message: "the request is too large")
        case .unsupportedMediaType:
            return .refusedWhole(status: 415, message: "unsupported media type")
        case .internalServerError:
            return .failed(.unexpectedResponse(status: 500, code: nil))
        case .undocumented(let status, _):
            return status >= 500
                ? .unavailable(retryAfter: nil) : .failed(.unexpectedResponse(status: status, code: nil))
        }
    }

    /// One bucket's result inside a batch answer: the status `POST /step/ingest` would have given it.
    private func apply(
        _ result: Components.Schemas.IngestBatchResponse.ResultsPayloadPayload, to bucket: QueuedBucket,
        report: inout FlushReport
    ) {
        switch (result.status, result.body) {
        case (200, .IngestResponse(let answer)):
            _ = state.remove(key: bucket.idempotencyKey)
            let day = DayState(answer: answer, bucket: bucket)
            note(day)
            report.delivered.append(.init(bucket: bucket, day: day))
        case (400, .IngestError(let error)), (413, .IngestError(let error)):
            // Malformed, or larger than the server takes for one ingest: refused for good, as it would be alone.
            refuse(bucket, .invalidRequest(error.message), report: &report)
        case (403, .IngestError(let error)) where error.error == "WALKER_SUSPENDED":
            // An operator may reinstate the walker: the bucket stays, under its key (the server gave it back).
            pause(for: configuration.retry.suspendedPause)
            report.interruption = .walkerSuspended
        case (403, .IngestError):
            refuse(bucket, .sourceNotWhitelisted(sourceBundleId: bucket.sourceBundleId), report: &report)
        case (422, .IngestError(let error)):
            if error.error == "IDEMPOTENCY_KEY_REUSED" {
                refuse(bucket, .idempotencyKeyReused, report: &report)
            } else {
                refuse(bucket, .rejected(reasons: error.details.strings("reasons")), report: &report)
            }
        case (429, let body):
            var retryAfter: TimeInterval?
            if case .IngestError(let error) = body, let seconds = error.details.int("retryAfterSeconds") {
                retryAfter = TimeInterval(seconds)
            }
            pause(for: retryAfter)
            report.interruption = .rateLimited(retryAfter: retryAfter ?? configuration.retry.defaultPause)
        default:
            // 409 IDEMPOTENCY_IN_FLIGHT, 5xx, or an answer that does not fit: the same key again, later.
            backOff([bucket])
        }
    }

    private func refuse(_ bucket: QueuedBucket, _ error: StepLedgerError, report: inout FlushReport) {
        // A refusal says nothing of the day's state: a days read that left before it still tells the truth.
        _ = state.remove(key: bucket.idempotencyKey)
        report.refused.append(.init(bucket: bucket, error: error))
        var reasons: [String]
        switch error {
        case .rejected(let codes): reasons = codes
        case .sourceNotWhitelisted: reasons = ["SOURCE_NOT_WHITELISTED"]
        case .walkerSuspended: reasons = ["WALKER_SUSPENDED"]
        default: reasons = []
        }
        let key = bucket.day.description
        if var known = state.days[key], known.status != .queued {
            known.reasons = reasons
            state.record(known)
        } else if !state.buckets.contains(where: { $0.day == bucket.day }) {
            // The server refused the bucket, not the day: a day it already holds keeps the state it has there.
            if let server = state.serverDays?[key] {
                state.record(server)
            } else {
                state.record(
                    DayState(day: bucket.day, status: .rejected, reportedCount: bucket.count, reasons: reasons))
            }
        }
    }

    /// Records the server's word on a day, unless a newer bucket of the day is still queued (it is kept beneath).
    func note(_ day: DayState) {
        noteAnswer(about: day.day)
        state.noteServer(day)
        if state.buckets.contains(where: { $0.day == day.day }) {
            var queued = day
            queued.status = .queued
            queued.reportedCount = max(
                day.reportedCount, state.buckets.filter { $0.day == day.day }.map(\.count).max() ?? 0)
            queued.reconcileEta = nil
            state.record(queued)
        } else {
            state.record(day)
        }
    }

    private func noteAnswer(about day: CalendarDay) {
        answersNoted += 1
        dayAnsweredAt[day] = answersNoted
    }

    private func pause(for seconds: TimeInterval?) {
        let current = now()
        let wait = min(QueueState.maximumWait, max(1, seconds ?? configuration.retry.defaultPause))
        let until = current.addingTimeInterval(wait)
        let paused = max(state.pause(at: current) ?? until, until)
        state.pausedUntil = paused
        state.pausedFor = paused.timeIntervalSince(current)
    }

    private func backOff(_ buckets: [QueuedBucket]) {
        let current = now()
        for bucket in buckets {
            let draw = Double.random(in: 0...1, using: &random)
            state.update(key: bucket.idempotencyKey) {
                $0.failures += 1
                $0.notBefore = current.addingTimeInterval(
                    configuration.retry.delay(afterFailures: $0.failures, random: draw))
            }
        }
    }

    /// The App Check token for one request, asked of the app's provider each time; its failure as the client's own.
    func askAppCheckToken() async -> Result<String?, StepLedgerError> {
        do {
            return .success(try await credentials.appCheckToken())
        } catch {
            return .failure(.transport("the App Check token provider failed: \(error)"))
        }
    }

    /// A 401, 429 or 503 whose answer the generated client could not read: a proxy's, a load balancer's or a
    /// gateway's page (HTML, or nothing) rather than the server's JSON, or a `Retry-After` given as an HTTP date.
    /// Its status and `Retry-After` (whole seconds, or the time until the date, at least 0; nil when absent or
    /// unreadable), so it means what the server's own would. Nil for any other error.
    static func undecodedRefusal(_ error: any Error, now: Date = Date()) -> (status: Int, retryAfter: TimeInterval?)? {
        guard let error = error as? ClientError, let response = error.response,
            [401, 429, 503].contains(response.status.code)
        else { return nil }
        return (response.status.code, retryAfter(response.headerFields[.retryAfter], now: now))
    }

    /// A `Retry-After` value (RFC 9110 §10.2.3): a number of seconds, or an IMF-fixdate.
    static func retryAfter(_ value: String?, now: Date) -> TimeInterval? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if value.utf8.allSatisfy({ (0x30...0x39).contains($0) }) {
            return value.utf8.count <= 9 ? TimeInterval(value) : nil
        }
        guard let date = httpDate(value) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }

    /// An HTTP date (RFC 9110 §5.6.7, IMF-fixdate): `Sun, 06 Nov 1994 08:49:37 GMT`.
    static func httpDate(_ value: String) -> Date? {
        let parser = DateFormatter()
        parser.locale = Locale(identifier: "en_US_POSIX")
        parser.timeZone = TimeZone(identifier: "GMT")
        parser.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return parser.date(from: value.trimmingCharacters(in: .whitespaces))
    }

    /// A thrown error of the generated client as the client's own.
    static func failure(_ error: any Error) -> StepLedgerError {
        if let error = error as? StepLedgerError { return error }
        if let error = error as? ClientError {
            // The app could not give a session token (offline with one that expired, say): nothing was sent, and
            // it is no sign the walker must sign in again, so it is handled like a lost network and tried later.
            if let unavailable = error.underlyingError as? CredentialsUnavailable {
                return .transport("the session token provider failed: \(unavailable.underlying)")
            }
            if error.underlyingError is AnotherWalkersToken { return .storeBelongsToAnotherWalker }
            if let (status, retryAfter) = undecodedRefusal(error) {
                switch status {
                case 401: return .unauthorized(reason: nil)
                case 429: return .rateLimited(retryAfter: retryAfter ?? Self.unannouncedRateLimitWait)
                default: return .serverUnavailable(retryAfter: retryAfter)
                }
            }
            if let status = error.response?.status.code {
                // A success whose body could not be read (the connection lost halfway, a cancelled read): the
                // server acted, but its answer never arrived, so it is as unanswered as a lost request and tried
                // again under the same key, never thrown as though the request had been refused.
                if (200..<300).contains(status) {
                    return .transport("the \(status) answer's body could not be read: \(error.underlyingError)")
                }
                return .unexpectedResponse(status: status, code: nil)
            }
            return .transport(String(describing: error.underlyingError))
        }
        return .transport(String(describing: error))
    }
}

extension QueuedBucket {
    /// The bucket's `POST /step/ingest` body: a pure function of the stored bucket, so every send is the same.
    var wireBody: Components.Schemas.IngestRequest {
        Components.Schemas.IngestRequest(
            day: day.description, count: count,
            source: Components.Schemas.IngestRequest.SourcePayload(rawValue: source.rawValue) ?? .healthKit,
            tz: timeZoneIdentifier,
            sampleSpan: .init(startUtc: sampleStart, endUtc: sampleEnd), sourceBundleId: sourceBundleId,
            gyroSamplesObserved: gyroSamplesObserved,
            clientSubmittedAt: Date(timeIntervalSince1970: TimeInterval(clientSubmittedAtSeconds)),
            idempotencyKey: idempotencyKey, deviceModel: deviceModel, appVersion: appVersion)
    }
}

extension DayState {
    init(answer: Components.Schemas.IngestResponse, bucket: QueuedBucket) {
        let status: Status =
            switch answer.stepLog.reconciliationStatus {
            case .pending: .pending
            case .accepted: .accepted
            case .quarantined: .quarantined
            case .rejected: .rejected
            }
        self.init(
            day: CalendarDay(answer.stepLog.day) ?? bucket.day, status: status,
            reportedCount: answer.stepLog.reportedCount, acceptedCount: answer.stepLog.acceptedCount,
            reconcileEta: answer.reconcileEta, provisionalEnergy: answer.provisionalEnergy,
            energyCredited: answer.energyCredited, reasons: answer.warning?.reasons ?? [])
    }
}

extension OpenAPIObjectContainer {
    func string(_ key: String) -> String? { value[key] as? String }

    func int(_ key: String) -> Int? {
        switch value[key] {
        case let number as Int: number
        case let number as Int64: Int(number)
        case let number as Double: Int(exactly: number)
        default: nil
        }
    }

    func strings(_ key: String) -> [String] {
        (value[key] as? [(any Sendable)?])?.compactMap { $0 as? String } ?? []
    }
}
